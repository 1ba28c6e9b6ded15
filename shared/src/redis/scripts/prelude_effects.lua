--[[
prelude_effects.lua: the recording of a journaled write's effects (docs/journal.md#effects),
composed before prelude.lua (see `compose` in mod.rs), whose helpers read `effects` to tell a
journaled write. A fragment like it: local functions only, no shebang, no key of its own.
]]

-- The effects of the write at hand (docs/journal.md#effects): while a journaled write runs,
-- every write command it makes on a key is recorded as it was made, its key named relative
-- to the board's keys ('!' and the whole name for a key outside them), so a restore applies
-- what the write did instead of deciding it again under today's rules. Reads, streams and
-- TTL commands are not recorded: the journal entry carries each written key's absolute expiry
-- after the write instead (`journal`). `redis` below is this script's own: it records, then
-- calls Redis's.
-- The commands recorded are EFFECT's (effects/mod.rs `EFFECT_COMMANDS`); in the text forms below an
-- argument that is not printable ASCII (a marker's digest) is recorded as \1 and its bytes in
-- hex, so the entry stays text and the separators (\2 \3 \4) never occur in a word.
-- Three forms (effects/mod.rs): JSON; compact text (`Effects::parse_compact`: a command's words
-- joined by \2, commands by \3, then \4 and each written key's expiry joined by \2 in the
-- order the keys were first written; a key named in full the first time, then by that place),
-- a third fewer bytes and no encoder; and packed (`Effects::parse_packed`: MessagePack, binary-
-- safe, so the write's call keeps each command's words as they are and encodes them all once,
-- in C, at its entry: half the Lua work of compact text, BENCHMARKS.md). A form only once the
-- board's guard says a drain that reads it trimmed its journal (GUARD_COMPACT: '1' or `2:<ms>`
-- compact, GUARD_PACKED packed too, trim_journal.lua): a drain of an older release, still
-- running part-way through a deploy, would store an entry in a form it cannot read without
-- its effects.
local raw_redis = redis
local effects, effect_keys, effect_names, effects_base
local effects_compact, effects_packed, held_forms = false, false, {}
local function effect_arg(arg)
  if type(arg) == 'number' then return string.format('%.17g', arg) end
  if not string.find(arg, '[^\32-\126]') then return arg end
  -- One format per 512 bytes (a digest: one in all), not a call per byte.
  local hex = {}
  for i = 1, #arg, 512 do
    local j = math.min(i + 511, #arg)
    hex[#hex + 1] = string.format(string.rep('%02x', j - i + 1), string.byte(arg, i, j))
  end
  return '\1' .. table.concat(hex)
end
-- A written key as the effects name it: relative to the board's keys, or '!' and its whole name.
local function effect_name(traced)
  if string.sub(traced, 1, #effects_base) == effects_base then return string.sub(traced, #effects_base + 1) end
  return '!' .. traced
end
local redis = setmetatable({}, {__index = raw_redis})
redis.call = function(forwarded_command, forwarded_key, ...)
  local result = raw_redis.call(forwarded_command, forwarded_key, ...)
  if effects and EFFECT[forwarded_command] and not (forwarded_command == 'BITFIELD' and ... == 'GET') then
    local traced = forwarded_key
    local place = effect_keys[traced]
    if effects_packed then
      -- Named, and its words encoded, once at the entry (`journal`).
      if place == nil then
        place = #effect_keys + 1
        effect_keys[place] = traced
        effect_keys[traced] = place
      end
      effects[#effects + 1] = {forwarded_command, place, ...}
      return result
    end
    local named
    if place == nil then
      named = effect_name(traced)
      effect_keys[#effect_keys + 1] = traced
      effect_keys[traced] = #effect_keys
      effect_names[#effect_keys] = named
      if effects_compact then named = effect_arg(named) end
    elseif effects_compact then
      named = place
    else
      named = effect_names[place]
    end
    local line = {forwarded_command, named, ...}
    for i = 3, #line do line[i] = effect_arg(line[i]) end
    effects[#effects + 1] = effects_compact and table.concat(line, '\2') or line
  end
  return result
end

-- Starts recording the effects of one write for its journal entry (a stream `journal` key;
-- false or nil: the write journals nothing, so nothing is recorded). The board's keys are
-- the journal's name without its last part; `guard_key` is that board's guard, read once a call
-- for GUARD_COMPACT (a journal without one names itself there, and records JSON).
local function effects_begin(journal_key, guard_key)
  if journal_key then
    effects, effect_keys, effect_names = {}, {}, {}
    effects_base = string.sub(journal_key, 1, #journal_key - #':journal')
    local held = false
    if guard_key == effects_base .. ':guard' then
      if held_forms[guard_key] == nil then held_forms[guard_key] = raw_redis.call('HGET', guard_key, GUARD_COMPACT) end
      held = held_forms[guard_key]
    end
    -- Any other value a drain wrote ('1', `2:<ms>`) says it reads compact text.
    effects_packed = held == GUARD_PACKED
    effects_compact = held and not effects_packed
  else
    effects = nil
  end
end

-- Appends an applied write to its board's journal (a stream, docs/journal.md): `entry` what was
-- asked (JSON, journal.rs), `outcome` what it did. An empty entry: the journal is off. In the
-- write's own call, so a write is applied if and only if it is journaled.
-- With them go the write's effects ('x', `effects_begin`: its commands, then each written key's
-- absolute expiry in ms after the write: -1 none, -2 gone).
local function journal(key, entry, outcome)
  if entry == '' then return end
  local recorded = effects
  effects = nil
  if not recorded then
    raw_redis.call('XADD', key, '*', 'e', entry, 'o', outcome)
    return
  end
  -- Each key here went through a checked `redis.call` of this script: forwarded as those are.
  local expiries, forwarded_command = {}, 'PEXPIRETIME'
  if effects_packed then
    local names = {}
    for i = 1, #effect_keys do
      names[i] = effect_name(effect_keys[i])
      expiries[i] = raw_redis.call(forwarded_command, effect_keys[i])
    end
    raw_redis.call('XADD', key, '*', 'e', entry, 'o', outcome, 'x', cmsgpack.pack({names, recorded, expiries}))
    return
  end
  for i = 1, #effect_keys do
    local at = raw_redis.call(forwarded_command, effect_keys[i])
    if effects_compact then
      expiries[i] = string.format('%d', at)
    else
      expiries[#expiries + 1] = effect_names[i]
      expiries[#expiries + 1] = at
    end
  end
  local written
  if effects_compact then
    written = table.concat(recorded, '\3') .. '\4' .. table.concat(expiries, '\2')
  else
    written = cjson.encode({recorded, expiries})
  end
  raw_redis.call('XADD', key, '*', 'e', entry, 'o', outcome, 'x', written)
end
