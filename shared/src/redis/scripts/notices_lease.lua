#!lua
--[[
notices_lease.lua: a notification drain's (or a restore's) lease on one board
(docs/notifications.md): taken, renewed while the drain sends, released when it ends, each only
by the drain that holds it. A GET then a DEL would delete a lease that expired and was taken by
the next drain in between; a SET NX sent again after its reply was lost (the store resends a
request whose connection died) would find the lease its first send took and give up.

KEYS[1]  the board's notices lock (string: the holding drain's token, with a TTL)

ARGV[1]  the drain's token
ARGV[2]  "take" (unless another token holds it; held by this token already: renewed),
         "renew" (the lease runs ARGV[3] ms from now) or "release" (deleted)
ARGV[3]  the lease in ms (take and renew)

Reply: 1 when this drain holds (took, renewed) or held (released) the lease, 0 when it did not
(another drain holds it, or it expired and another drain may hold it: this one stops without
committing)
]]

if ARGV[2] == 'take' then
  local holder = redis.call('GET', KEYS[1])
  if holder and holder ~= ARGV[1] then return 0 end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  return 1
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == 'renew' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
else
  redis.call('DEL', KEYS[1])
end
return 1
