#!lua
--[[
notices_dropped.lua: how many of a board's rank moves the notices stream dropped since the
drain last asked (docs/notifications.md#bounded). The write scripts cap the stream at
NOTICES_MAX_LEN entries, dropping the oldest; every entry ever added is either still there,
trimmed by the drain after sending (counted in "delivered"), or dropped:
dropped = entries-added - length - delivered.

KEYS[1]  the board's notices (stream)
KEYS[2]  the drain's count of the notices (hash: "delivered", "dropped" reported so far)

Reply: the drops not reported before (0 when none), now counted as reported. A stream created
anew (deleted, flushed) restarts the count.
]]

if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  return 0
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local added, length
for i = 1, #info, 2 do
  if info[i] == 'entries-added' then added = info[i + 1] end
  if info[i] == 'length' then length = info[i + 1] end
end
local counted = redis.call('HMGET', KEYS[2], 'delivered', 'dropped')
local delivered, reported = tonumber(counted[1] or '0'), tonumber(counted[2] or '0')
local dropped = added - length - delivered
if dropped < reported then
  -- Fewer entries than the count knows of: a stream created anew. Start counting again.
  redis.call('HSET', KEYS[2], 'delivered', math.max(added - length, 0), 'dropped', 0)
  return 0
end
if dropped == reported then return 0 end
redis.call('HSET', KEYS[2], 'dropped', dropped)
return dropped - reported
