#!lua
--[[
apply_event.lua: apply one scored event to one board, exactly once, in one round trip.

The `#!lua` shebang makes Redis 7 refuse the whole script up front when it is out of
memory, instead of failing half-way through its writes.

KEYS[1]    event marker: string "<fingerprint>\n<reply JSON>", kept ARGV[9] seconds
KEYS[2]    idempotency ledger (hash, field -> points given): the user's day ledger, the
           user's lifetime ledger or the board's target ledger, by the rule's scope
KEYS[3]    the user's day ledger (holds the day's cap counters; may equal KEYS[2])
KEYS[4]    the board's guard (hash): "ban|<user>" for banned users, "closed|<kind>:<id>" for
           periods frozen for archiving; "live|season:<id>" is set when a season's board is
           created, so the archive can tell a lost board from an empty season
KEYS[5]    the user's rate-limit log of this action (sorted set: event fingerprint -> ms);
           untouched when the rule has no rate limit
KEYS[6..]  one sorted set per period of the board, scored with the tie-break composite
           points * 2^31 + time part (see tiebreak.rs)

ARGV[1]    payload fingerprint of the event
ARGV[2]    member (user id)
ARGV[3]    "give" or "take"
ARGV[4]    points a give awards (positive integer)
ARGV[5]    ledger field in KEYS[2], "" when the rule records nothing
ARGV[6]    cap counter field in KEYS[3], "" when the rule has no daily cap
ARGV[7]    the daily cap in points
ARGV[8]    time part of the composite for "reached now": the server's clock when this script
           runs (earlier: larger), never the client's occurred_at
ARGV[9]    marker TTL in seconds
ARGV[10]   EXPIREAT for KEYS[2], "0" for none
ARGV[11]   EXPIREAT for KEYS[3], "0" for none
ARGV[12]   refusal of a first delivery: "" (none), "too_late" or "in_future". Checked only
           after the marker, so a retry is a duplicate whenever it arrives
ARGV[13..] for each period board, in KEYS order: period kind, period id, EXPIREAT ("0": none)
then, after those n triples (R = 13 + 3n):
ARGV[R]    rate limit: events allowed in the window ("0": no limit)
ARGV[R+1]  rate limit window in ms
ARGV[R+2]  now in ms (the server's clock)

Reply: a two-element array {status, body}
  {"new", json}          applied now (or counted as nothing); json is also stored in the marker
  {"duplicate", json}    this event id was seen with this payload; json is the first reply
  {"conflict", ""}       this event id was seen with another payload; nothing written
  {"too_late", ""}       a first delivery outside the event window (ARGV[12]); nothing written
  {"in_future", ""}
  {"out_of_range", ""}   a score would leave the composite's range; nothing written
  {"banned", ""}         the user is banned from this board; nothing written
  {"period_closed", id}  a period the event lands in is frozen (archived); nothing written
  {"rate_limited", s}    the user used up the action's rate limit; s = seconds until the
                         window frees a slot; nothing written (not even the marker)
json: {"applied":bool,"delta":n,"reason":s?,"capped":n,
       "periods":[{"period":s,"period_id":s,"score":n,"delta":n,"rank":n?}]}
A give adds its points to every period and the member reached the new score now (ARGV[8]).
A take-back removes what the ledger says was given, but never more than a period still holds
(each period's "delta" is what it lost; the board's "delta" the largest loss), and keeps the
member's reached-at time: they held at least the lower score since then.
]]

local SPAN = 2147483648      -- 2^31, tiebreak::TIME_SPAN
local MAX_POINTS = 4194303   -- 2^22 - 1, tiebreak::MAX_POINTS

local marker = redis.call('GET', KEYS[1])
if marker then
  local sep = string.find(marker, '\n', 1, true)
  if string.sub(marker, 1, sep - 1) == ARGV[1] then
    return {'duplicate', string.sub(marker, sep + 1)}
  end
  return {'conflict', ''}
end
if ARGV[12] ~= '' then return {ARGV[12], ''} end

local member = ARGV[2]
local give = ARGV[3] == 'give'
local ledger_field = ARGV[5]
local cap_field = ARGV[6]
local tie = tonumber(ARGV[8])
local FIRST_BOARD, PERIOD_ARGS = 6, 13
local boards = #KEYS - FIRST_BOARD + 1

-- Refusals that depend on the board's state, checked with one read.
local guard_fields = {'ban|' .. member}
for i = 1, boards do
  local base = PERIOD_ARGS + 3 * (i - 1)
  guard_fields[i + 1] = 'closed|' .. ARGV[base] .. ':' .. ARGV[base + 1]
end
local guards = redis.call('HMGET', KEYS[4], unpack(guard_fields))
if guards[1] then return {'banned', ''} end
for i = 1, boards do
  if guards[i + 1] then return {'period_closed', ARGV[PERIOD_ARGS + 3 * (i - 1) + 1]} end
end

-- Rate limit: a sliding window of the user's recent events of this action. Only read here;
-- the event is logged with the other writes, so a refused event leaves no trace.
local RATE = PERIOD_ARGS + 3 * boards
local rate_max, rate_window, now_ms = tonumber(ARGV[RATE]), tonumber(ARGV[RATE + 1]), tonumber(ARGV[RATE + 2])
-- The window is (now - window, now]; entries at or before its floor have left it.
local window_floor = string.format('%.0f', now_ms - rate_window)
local window_start = '(' .. window_floor
if rate_max > 0 then
  local recent = redis.call('ZCOUNT', KEYS[5], window_start, '+inf')
  if recent >= rate_max then
    -- The slot frees when the entry that put the log at its limit leaves the window.
    local oldest = redis.call('ZRANGEBYSCORE', KEYS[5], window_start, '+inf', 'WITHSCORES', 'LIMIT', recent - rate_max, 1)
    local wait_ms = tonumber(oldest[2]) + rate_window - now_ms
    return {'rate_limited', tostring(math.max(math.ceil(wait_ms / 1000), 1))}
  end
end

-- TTLs are set once, on a key that exists without one, and never refreshed. A season board
-- getting its TTL has just been created: the guard remembers it had members.
local function expire_once(key, at, kind, id)
  if at ~= '0' and redis.call('TTL', key) == -1 then
    redis.call('EXPIREAT', key, at)
    if kind == 'season' then redis.call('HSET', KEYS[4], 'live|season:' .. id, 1) end
  end
end

local delta, capped, reason = 0, 0, nil
if give then
  if ledger_field ~= '' and redis.call('HEXISTS', KEYS[2], ledger_field) == 1 then
    reason = 'already_counted'
  else
    delta = tonumber(ARGV[4])
    if cap_field ~= '' then
      local room = math.max(tonumber(ARGV[7]) - tonumber(redis.call('HGET', KEYS[3], cap_field) or '0'), 0)
      if room < delta then
        capped = delta - room
        delta = room
        if delta == 0 then reason = 'daily_cap' end
      end
    end
  end
else
  local given = ledger_field ~= '' and redis.call('HGET', KEYS[2], ledger_field)
  if given then delta = -tonumber(given) else reason = 'nothing_to_take_back' end
end

-- Every check happens before the first write: a refused event leaves no trace.
local composites, points, changes = {}, {}, {}
local largest = 0
for i = 1, boards do
  composites[i] = tonumber(redis.call('ZSCORE', KEYS[FIRST_BOARD - 1 + i], member) or '0')
  local held = math.floor(composites[i] / SPAN)
  if held + delta > MAX_POINTS then return {'out_of_range', ''} end
  -- Never below zero: a take-back cannot remove more than the period still holds.
  points[i] = math.max(held + delta, 0)
  changes[i] = points[i] - held
  if math.abs(changes[i]) > math.abs(largest) then largest = changes[i] end
end

local ledger_changed = delta ~= 0
if ledger_changed then
  if give then
    if ledger_field ~= '' then redis.call('HSET', KEYS[2], ledger_field, delta) end
  else
    redis.call('HDEL', KEYS[2], ledger_field)
  end
  if cap_field ~= '' then redis.call('HINCRBY', KEYS[3], cap_field, delta) end
  expire_once(KEYS[2], ARGV[10])
  expire_once(KEYS[3], ARGV[11])
  for i = 1, boards do
    local key = KEYS[FIRST_BOARD - 1 + i]
    if points[i] > 0 and changes[i] ~= 0 then
      -- A give is reached now; a take-back keeps the time the member got there.
      local time_part = give and tie or composites[i] % SPAN
      redis.call('ZADD', key, string.format('%.0f', points[i] * SPAN + time_part), member)
      local base = PERIOD_ARGS + 3 * (i - 1)
      expire_once(key, ARGV[base + 2], ARGV[base], ARGV[base + 1])
    elseif points[i] == 0 then
      redis.call('ZREM', key, member)
    end
  end
end

local periods = {}
for i = 1, boards do
  local base = PERIOD_ARGS + 3 * (i - 1)
  local entry = {period = ARGV[base], period_id = ARGV[base + 1], score = points[i], delta = changes[i]}
  local rank = redis.call('ZREVRANK', KEYS[FIRST_BOARD - 1 + i], member)
  if rank then entry.rank = rank + 1 end
  periods[i] = entry
end

local reply = cjson.encode({applied = ledger_changed, delta = largest, reason = reason, capped = capped, periods = periods})
redis.call('SET', KEYS[1], ARGV[1] .. '\n' .. reply, 'EX', ARGV[9])
if rate_max > 0 then
  -- The log outlives its newest entry by one window: refreshed on purpose (it is a window).
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', window_floor)
  redis.call('ZADD', KEYS[5], ARGV[RATE + 2], ARGV[1])
  redis.call('PEXPIRE', KEYS[5], rate_window)
end
return {'new', reply}
