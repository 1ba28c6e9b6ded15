#!lua
--[[
correct_score.lua: an admin's correction of one user's score on
some periods of one board (the current ones, or a past day and the periods containing it),
with its audit entry, exactly once per correction id, atomically. All checks happen before
the first write.

KEYS[1]    the board's guard (hash): "ban|<user>", "closed|<kind>:<id>" (see apply_event.lua)
KEYS[2]    the board's audit log (list, newest first)
KEYS[3]    the correction's marker: string "<fingerprint>\n<audit entry>\n<periods JSON>",
           kept ARGV[7] seconds
KEYS[4..]  the n period sorted sets to correct, scored with the tie-break composite; then,
           when ARGV[8] is 1, the member's statement of each of those periods (hash, see
           apply_event.lua), where the correction is itemised as "c:<correction id>" ->
           "<points changed in that period>|<reason>"

ARGV[1]    member (user id)
ARGV[2]    delta in points (signed, non-zero)
ARGV[3]    time part of the composite for a score reached now (the server's clock)
ARGV[4]    audit entry (JSON)
ARGV[5]    audit log length kept
ARGV[6]    payload fingerprint of the correction
ARGV[7]    marker TTL in seconds
ARGV[8]    1 when the board keeps statements, else 0
ARGV[9]    the correction's statement field ("c:<correction id>")
ARGV[10]   the correction's reason
ARGV[11..] for each period, in KEYS order: period kind, period id, TTL in seconds ("0": none)

An increase is reached now; a decrease keeps the member's reached-at time (they held at
least the lower score since then), as a take-back does.

Reply: a three-element array {status, entry, periods}
  {"new", entry, json}  json: [{"period":s,"period_id":s,"score":n,"delta":n,"rank":n?}]
  {"duplicate", entry, json}  this correction id was seen with this payload: the first answer
  {"conflict", "", ""}        this correction id was seen with another payload; nothing written
  {"banned", "", ""}          the user is banned from this board; nothing written
  {"period_closed", id, ""}   a period to correct is frozen (archived); nothing written
  {"out_of_range", "", ""}    a score would go below 0 or past the composite's range; nothing
                              written
]]

local marker = redis.call('GET', KEYS[3])
if marker then
  local first = string.find(marker, '\n', 1, true)
  if string.sub(marker, 1, first - 1) ~= ARGV[6] then return {'conflict', '', ''} end
  local second = string.find(marker, '\n', first + 1, true)
  return {'duplicate', string.sub(marker, first + 1, second - 1), string.sub(marker, second + 1)}
end

local member = ARGV[1]
local delta = tonumber(ARGV[2])
local tie = tonumber(ARGV[3])
local FIRST_BOARD, PERIOD_ARGS = 4, 11
local statements = ARGV[8] == '1'
local boards = (#KEYS - FIRST_BOARD + 1) / (statements and 2 or 1)

local refusal, closed = guard_refusal_of_args(KEYS[1], member, boards, PERIOD_ARGS)
if refusal then return {refusal, closed, ''} end

local composites, points = {}, {}
for i = 1, boards do
  composites[i] = tonumber(redis.call('ZSCORE', KEYS[FIRST_BOARD - 1 + i], member) or '0')
  points[i] = points_of(composites[i]) + delta
  if points[i] < 0 or points[i] > MAX_POINTS then return {'out_of_range', '', ''} end
end

local periods = {}
for i = 1, boards do
  local key = KEYS[FIRST_BOARD - 1 + i]
  if points[i] > 0 then
    local time_part = delta > 0 and tie or composites[i] % SPAN
    redis.call('ZADD', key, composite_of(points[i], time_part), member)
    expire_period_once(key, KEYS[1], period_arg(PERIOD_ARGS, i, 0), period_arg(PERIOD_ARGS, i, 1), period_arg(PERIOD_ARGS, i, 2))
  else
    remove_member(key, KEYS[1], period_arg(PERIOD_ARGS, i, 0), period_arg(PERIOD_ARGS, i, 1), member)
  end
  if statements then
    local statement = KEYS[FIRST_BOARD - 1 + boards + i]
    redis.call('HSET', statement, ARGV[9], delta .. '|' .. ARGV[10])
    expire_once(statement, period_arg(PERIOD_ARGS, i, 2))
  end
  local entry = {period = period_arg(PERIOD_ARGS, i, 0), period_id = period_arg(PERIOD_ARGS, i, 1), score = points[i], delta = delta}
  local rank = redis.call('ZREVRANK', key, member)
  if rank then entry.rank = rank + 1 end
  periods[i] = entry
end
redis.call('LPUSH', KEYS[2], ARGV[4])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[5]) - 1)
local reply = cjson.encode(periods)
redis.call('SET', KEYS[3], ARGV[6] .. '\n' .. ARGV[4] .. '\n' .. reply, 'EX', ARGV[7])
return {'new', ARGV[4], reply}
