#!lua
--[[
scale_hot.lua: decay a scale board once per scale period: multiply every item's heat by a
factor (periodic scaling, docs/hot-boards.md) and drop items that have decayed to nothing.

The period's start is the guard: a period is scaled at most once, and never after a later
one, so duplicate or late deliveries do nothing.

KEYS[1]  the board (sorted set, item -> heat); heat is added to it directly
KEYS[2]  meta hash: synthesized_at (unix seconds of the last scaled period), members

ARGV[1]  start of the scale period, unix seconds
ARGV[2]  factor, 0 < f < 1
ARGV[3]  items whose heat falls below this are removed

Reply: {status, members}
  {"new", n}        scaled now; the board holds n items
  {"duplicate", n}  this period was already scaled
  {"stale", n}      a later period was already scaled
]]

local board, meta = KEYS[1], KEYS[2]
local period = tonumber(ARGV[1])

local last_period = tonumber(redis.call('HGET', meta, 'synthesized_at'))
if last_period and period <= last_period then
  return {period == last_period and 'duplicate' or 'stale', redis.call('ZCARD', board)}
end

-- ZUNIONSTORE of a missing key stores nothing and deletes nothing: an unheated board stays empty.
redis.call('ZUNIONSTORE', board, 1, board, 'WEIGHTS', ARGV[2])
redis.call('ZREMRANGEBYSCORE', board, '-inf', '(' .. ARGV[3])
local members = redis.call('ZCARD', board)
redis.call('HSET', meta, 'synthesized_at', ARGV[1], 'members', members)
return {'new', members}
