#!lua
--[[
void.lua: an admin's void of points one user's events earned (domain/void.rs computes how many,
per period, from the journal), with its audit entry, exactly once per void id, atomically. All
checks happen before the first write. A period never loses more than it holds; a period frozen
for archiving is not live and is left as it is.

KEYS[1]    the board's guard (hash): "ban|<user>", "closed|<kind>:<id>" (see apply_event.lua),
           and ARGV[10], the count of the user's voids
KEYS[2]    the board's audit log (list, newest first)
KEYS[3]    the void's marker: string "<fingerprint>\n<audit entry>\n<periods JSON>", kept
           ARGV[5] seconds
KEYS[4]    the board's journal (stream, docs/journal.md)
KEYS[5..]  the n period sorted sets (a points board's composites); then, when ARGV[6] is 1, the
           member's statement of each (hash, see apply_event.lua), where the void is itemised
           as "v:<void id>" -> "<points removed, a negative number>|<reason>"; then the
           member's day ledger of each voided give's entry (hash, see apply_event.lua), one
           per entry; then, for each league period of the n (see the last ARGV), its placements
           (hash), cohorts and cohorts in order (sorted sets, docs/leagues.md); then the
           arrivals of each watched period (hash, prelude.lua `record_move`); then, when
           ARGV[13] is not "", the board's notices (stream, docs/notifications.md)

ARGV[1]    member (user id)
ARGV[2]    audit entry (JSON)
ARGV[3]    audit log length kept
ARGV[4]    payload fingerprint of the void
ARGV[5]    marker TTL in seconds
ARGV[6]    1 when the board keeps statements, else 0
ARGV[7]    the void's statement field ("v:<void id>")
ARGV[8]    the void's reason
ARGV[9]    the void's journal entry (its audit entry and what it takes), appended with the
           reply when the void applies now; "" when the journal is off
ARGV[10]   the guard field counting the user's voids on this board
ARGV[11]   that count when the void was decided ("0": none): another void landed since if it
           differs ("stale"); "" for a restore's replay, which checks nothing (neither this nor
           the ledger entries below)
ARGV[12]   n, the number of periods
ARGV[13]   the void as notifications name it (its id); "" when the board records no rank moves.
           An applied void records its rank moves as apply_event.lua does
ARGV[14..] for each period, in KEYS order: period kind, period id, points to remove (positive),
           the top watched ("0": none), the index in KEYS of its arrivals ("0": not watched);
           then for each ledger key: the entry's field and its field as earlier releases wrote
           it. Each must still hold a give (not "0"): a take-back that landed since the journal
           was read took it already ("stale"). The entry is set to "0": the give stays counted
           (the same like that day earns nothing again) and a later take-back takes nothing
           (not its points a second time); the day's cap counter is left as it is
ARGV[last - 1] which of the n periods are the board's league periods (positions,
           comma-separated; "": none; a void across a week's end holds two): a void that moves a
           placed member keeps their cohort's order (prelude_league.lua `order_sync`) and, where
           that period is watched, records their move in the cohort
ARGV[last] the function's clock (ms): a period set the guard records, missing before its
           expiry, is a loss: the board is fenced and the void refused, nothing else written
           (prelude.lua `fence_if_lost`), so nothing is taken against missing history

Reply: a three-element array {status, entry, periods}
  {"new", entry, json}  json: [{"period":s,"period_id":s,"score":n,"delta":n,"rank":n?}] (the
                        member's points after the void, and the change; no rank at 0), for
                        each period not frozen
  {"duplicate", entry, json}  this void id was seen with this payload: the first answer
  {"conflict", "", ""}        this void id was seen with another payload; nothing written
  {"banned", "", ""}          the user is banned from this board; nothing written
  {"stale", "", ""}           a take-back or another void landed since the void was decided;
                              nothing written
]]

effects_begin(ARGV[9] ~= '' and KEYS[4], KEYS[1])
fence_check(KEYS[1])
refuse_ended(redis.call('HGET', KEYS[1], GUARD_ENDED))

local marker = redis.call('GET', KEYS[3])
if marker then
  local first = string.find(marker, '\n', 1, true)
  if string.sub(marker, 1, first - 1) ~= ARGV[4] then return {'conflict', '', ''} end
  local second = string.find(marker, '\n', first + 1, true)
  return {'duplicate', string.sub(marker, first + 1, second - 1), string.sub(marker, second + 1)}
end

local member = ARGV[1]
local FIRST_BOARD = 5
local statements = ARGV[6] == '1'
local boards = tonumber(ARGV[12])
local notice = ARGV[13]
-- The notices are the last key, when there are any (`notice` names the write).
local NOTICES = KEYS[#KEYS]
local noticed = notice ~= ''
local function period(i, part) return ARGV[14 + 5 * (i - 1) + part] end
local watched = 0
for i = 1, boards do
  if tonumber(period(i, 3)) > 0 then watched = watched + 1 end
end
local first_ledger = FIRST_BOARD + boards * (statements and 2 or 1)
-- The league periods: the index in KEYS of each one's placements (its cohorts and order follow).
local leagues, league_at = {}, {}
for at in string.gmatch(ARGV[#ARGV - 1], '%d+') do leagues[#leagues + 1] = tonumber(at) end
local last_ledger = #KEYS - (noticed and 1 or 0) - watched - 3 * #leagues
for j, i in ipairs(leagues) do league_at[i] = last_ledger + 1 + 3 * (j - 1) end
local function ledger_field(k) return 14 + 5 * boards + 2 * (k - first_ledger) end

if redis.call('HEXISTS', KEYS[1], GUARD_BAN .. member) == 1 then return {'banned', '', ''} end
if ARGV[11] ~= '' and (redis.call('HGET', KEYS[1], ARGV[10]) or '0') ~= ARGV[11] then return {'stale', '', ''} end
-- A restore's replay does not check: it takes what the void took, whatever a shadow's shorter
-- TTLs or candidate rules left of the ledgers.
local replay = ARGV[11] == ''
for k = first_ledger, replay and 0 or last_ledger do
  local field = ledger_field(k)
  local held = redis.call('HMGET', KEYS[k], ARGV[field], ARGV[field + 1])
  local given = held[1] or held[2]
  if not given or tonumber(given) == 0 then return {'stale', '', ''} end
end

for i = 1, boards do
  local key, kind, id = KEYS[FIRST_BOARD - 1 + i], period(i, 0), period(i, 1)
  if redis.call('HEXISTS', KEYS[1], GUARD_CLOSED .. kind .. ':' .. id) == 0 and not redis.call('ZSCORE', key, member) then
    fence_if_lost(KEYS[1], key, kind, id, tonumber(ARGV[#ARGV]))
  end
end

-- Every key written below that no check above has read (prelude.lua `writable`).
for i = 1, boards do
  writable(KEYS[FIRST_BOARD - 1 + i], 'zset')
  if statements then writable(KEYS[FIRST_BOARD - 1 + boards + i], 'hash') end
end
for k = first_ledger, last_ledger do writable(KEYS[k], 'hash') end
for i = 1, boards do
  if tonumber(period(i, 3)) > 0 then countable(KEYS[tonumber(period(i, 4))], '#') end
end
writable(KEYS[2], 'list')
if noticed then writable(NOTICES, 'stream') end
if ARGV[9] ~= '' then writable(KEYS[4], 'stream') end
-- The member's cohort in each league period, read before the first write, with the keys a
-- cohort move reads or writes after it.
local cohort_of = {}
for _, i in ipairs(leagues) do
  cohort_of[i] = redis.call('HGET', KEYS[league_at[i]], member)
  writable(KEYS[league_at[i] + 1], 'zset')
  writable(KEYS[league_at[i] + 2], 'zset')
end

-- An empty table encodes as {}, not []: the caller reads both.
local periods, moves = {}, {}
for i = 1, boards do
  local key, kind, id = KEYS[FIRST_BOARD - 1 + i], period(i, 0), period(i, 1)
  if redis.call('HEXISTS', KEYS[1], GUARD_CLOSED .. kind .. ':' .. id) == 0 then
    local entry = {period = kind, period_id = id}
    local composite = redis.call('ZSCORE', key, member)
    local held = composite and points_of(composite) or 0
    local top = noticed and tonumber(period(i, 3)) or 0
    local after = math.max(held - tonumber(period(i, 2)), 0)
    local written = after > 0 and composite
    if after > 0 and after ~= held then
      -- Less than they had: they held at least this since they reached it.
      written = composite_of(after, tonumber(composite) % SPAN)
      redis.call('ZADD', key, written, member)
    elseif after == 0 and composite then
      remove_member(key, KEYS[1], kind, id, member)
    end
    -- 0 - n, not -n: -0 is not a JSON integer.
    entry.delta = 0 - (held - after)
    entry.score = after
    if after > 0 then entry.rank = redis.call('ZREVRANK', key, member) + 1 end
    if top > 0 and entry.delta ~= 0 then
      record_move(moves, 'T', key, kind, id, top, member, composite, KEYS[tonumber(period(i, 4))])
    end
    local at = league_at[i]
    if at and cohort_of[i] and entry.delta ~= 0 then
      if top > 0 then
        record_cohort(moves, 'L', key, KEYS[at], KEYS[at + 1], KEYS[at + 2], kind, id, member, composite, false, cohort_of[i],
          nil, written)
      else
        order_sync(KEYS[at + 2], cohort_of[i], member, composite, written)
      end
    end
    if statements and entry.delta ~= 0 then
      local statement = KEYS[FIRST_BOARD - 1 + boards + i]
      -- A member with points has a statement (with its period's TTL); none is made here.
      if redis.call('EXISTS', statement) == 1 then redis.call('HSET', statement, ARGV[7], entry.delta .. '|' .. ARGV[8]) end
    end
    periods[#periods + 1] = entry
  end
end
if noticed then record_moves(NOTICES, notice, moves) end
for k = first_ledger, last_ledger do
  local field = ledger_field(k)
  -- Checked above, or a replay: never a ledger made here, without its TTL.
  if not replay or redis.call('EXISTS', KEYS[k]) == 1 then
    redis.call('HSET', KEYS[k], ARGV[field], '0')
    if ARGV[field + 1] ~= ARGV[field] then redis.call('HDEL', KEYS[k], ARGV[field + 1]) end
  end
end
redis.call('HINCRBY', KEYS[1], ARGV[10], 1)
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
local reply = cjson.encode(periods)
redis.call('SET', KEYS[3], ARGV[4] .. '\n' .. ARGV[2] .. '\n' .. reply, 'EX', ARGV[5])
journal(KEYS[4], ARGV[9], reply)
return {'new', ARGV[2], reply}
