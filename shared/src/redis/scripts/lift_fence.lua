#!lua
--[[
lift_fence.lua: lifts a board's fence only if it is still the one the caller set (a move's
`moving`, docs/scaling.md#changing-shards): a move refused after it fenced the board lifts its
own fence, never one a write set meanwhile on finding a loss (`fence` and `lost`,
docs/journal.md#losses), which must hold until a restore completes.

KEYS[1]  the board's guard

ARGV[1]  the fence's value to lift

Reply: 1 when lifted, 0 when the fence is another (or none): left as it is
]]
if redis.call('HGET', KEYS[1], GUARD_FENCE) == ARGV[1] then
  redis.call('HDEL', KEYS[1], GUARD_FENCE)
  return 1
end
return 0
