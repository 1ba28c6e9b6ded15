#!lua
--[[
prelude.lua: helpers shared by the scripts loaded after it (sign_in.lua, correct_score.lua;
see `with_prelude` in mod.rs). Redis runs one script text, so the prelude is prepended to
each; it defines only constants and local functions, and touches no key by itself.

The `#!lua` shebang (first line of every composed script) makes Redis 7 refuse a script up
front when out of memory, instead of failing half-way through its writes.
]]

local SPAN = 2147483648      -- 2^31, tiebreak::TIME_SPAN
local MAX_POINTS = 4194303   -- 2^22 - 1, tiebreak::MAX_POINTS

-- Whole points of a member's composite score (nil: not on the board).
local function points_of(composite)
  return composite and math.floor(tonumber(composite) / SPAN) or 0
end

-- The answer for an event id already seen, from its marker "<fingerprint>\n<reply JSON>":
-- {'duplicate', json} for the same payload, {'conflict', ''} for another; nil when unseen.
local function replay(marker_key, fingerprint)
  local marker = redis.call('GET', marker_key)
  if not marker then return nil end
  local sep = string.find(marker, '\n', 1, true)
  if string.sub(marker, 1, sep - 1) == fingerprint then
    return {'duplicate', string.sub(marker, sep + 1)}
  end
  return {'conflict', ''}
end

-- Periods are passed as ARGV triples (kind, id, EXPIREAT) starting at ARGV[first]: field
-- 0, 1 or 2 of the i-th one.
local function period_arg(first, i, field)
  return ARGV[first + 3 * (i - 1) + field]
end

-- The board guard's refusal of a write for `member` to the `periods` periods whose triples
-- start at ARGV[first]: {'banned', ''}, {'period_closed', id}, or nil.
local function guard_refusal(guard_key, member, periods, first)
  local fields = {'ban|' .. member}
  for i = 1, periods do
    fields[i + 1] = 'closed|' .. period_arg(first, i, 0) .. ':' .. period_arg(first, i, 1)
  end
  local guards = redis.call('HMGET', guard_key, unpack(fields))
  if guards[1] then return {'banned', ''} end
  for i = 1, periods do
    if guards[i + 1] then return {'period_closed', period_arg(first, i, 1)} end
  end
  return nil
end

-- TTLs are set once, on a key that exists without one, and never refreshed.
local function expire_once(key, at)
  if at ~= '0' and redis.call('TTL', key) == -1 then
    redis.call('EXPIREAT', key, at)
    return true
  end
  return false
end

-- `expire_once` for the i-th period board (triples from ARGV[first]). A season board getting
-- its TTL has just been created: `guard_key` remembers that the season had members
-- ("live|season:<id>"), so the archive can tell a lost board from an empty season.
local function expire_period_once(key, guard_key, first, i)
  if expire_once(key, period_arg(first, i, 2)) and period_arg(first, i, 0) == 'season' then
    redis.call('HSET', guard_key, 'live|season:' .. period_arg(first, i, 1), 1)
  end
end

