#!lua
--[[
fence_older.lua: fences a shard of a layout the board's record names while S3 says the board
switched to another (docs/journal.md#rollbacks: a store restored from a snapshot taken before a
move's switch): its writes and reads answer 503 `board_restoring`, and the drain counts it lost,
until a restore. Only a guard that is there and born, and not fenced already: a guard a switch
freed meanwhile is not written back, and one a move's last step fences (`moving`) is that move's
to finish.

KEYS[1]  the shard's guard

Reply: 1 when fenced now, 0 when left as it is
]]
local state = redis.call('HMGET', KEYS[1], GUARD_BORN, GUARD_FENCE)
if not state[1] or state[2] then return 0 end
redis.call('HSET', KEYS[1], GUARD_FENCE, 1, GUARD_LOST, 1)
return 1
