--[[
correct_score.lua (loaded after prelude.lua): an admin's correction of one user's score on
every current period of one board, with its audit entry, atomically. All checks happen before
the first write.

KEYS[1]    the board's guard (hash): "ban|<user>", "closed|<kind>:<id>" (see apply_event.lua)
KEYS[2]    the board's audit log (list, newest first)
KEYS[3..]  the board's current period sorted sets, scored with the tie-break composite

ARGV[1]    member (user id)
ARGV[2]    delta in points (signed, non-zero)
ARGV[3]    time part of the composite (now: the corrected score is reached now)
ARGV[4]    audit entry (JSON)
ARGV[5]    audit log length kept
ARGV[6..]  for each period, in KEYS order: period kind, period id, EXPIREAT ("0": none)

Reply: a two-element array {status, body}
  {"corrected", json}    json: [{"period":s,"period_id":s,"score":n,"rank":n?}]
  {"banned", ""}         the user is banned from this board; nothing written
  {"period_closed", id}  a current period is frozen (archived); nothing written
  {"out_of_range", ""}   a score would go below 0 or past the composite's range; nothing written
]]

local member = ARGV[1]
local delta = tonumber(ARGV[2])
local tie = tonumber(ARGV[3])
local FIRST_BOARD, PERIOD_ARGS = 3, 6
local boards = #KEYS - FIRST_BOARD + 1

local refusal = guard_refusal(KEYS[1], member, boards, PERIOD_ARGS)
if refusal then return refusal end

local points = {}
for i = 1, boards do
  points[i] = points_of(redis.call('ZSCORE', KEYS[FIRST_BOARD - 1 + i], member)) + delta
  if points[i] < 0 or points[i] > MAX_POINTS then return {'out_of_range', ''} end
end

local periods = {}
for i = 1, boards do
  local key = KEYS[FIRST_BOARD - 1 + i]
  if points[i] > 0 then
    redis.call('ZADD', key, string.format('%.0f', points[i] * SPAN + tie), member)
    expire_once(key, period_arg(PERIOD_ARGS, i, 2))
  else
    redis.call('ZREM', key, member)
  end
  local entry = {period = period_arg(PERIOD_ARGS, i, 0), period_id = period_arg(PERIOD_ARGS, i, 1), score = points[i]}
  local rank = redis.call('ZREVRANK', key, member)
  if rank then entry.rank = rank + 1 end
  periods[i] = entry
end
redis.call('LPUSH', KEYS[2], ARGV[4])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[5]) - 1)
return {'corrected', cjson.encode(periods)}
