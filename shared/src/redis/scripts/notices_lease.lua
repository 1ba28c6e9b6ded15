#!lua
--[[
notices_lease.lua: a notification drain's lease on one board (docs/notifications.md): renewed
while the drain sends, released when it ends, each only by the drain that holds it. A GET then
a DEL would delete a lease that expired and was taken by the next drain in between.

KEYS[1]  the board's notices lock (string: the holding drain's token, with a TTL)

ARGV[1]  the drain's token
ARGV[2]  "renew" (the lease runs ARGV[3] ms from now) or "release" (deleted)
ARGV[3]  the lease in ms (renew only)

Reply: 1 when this drain held the lease (renewed or released), 0 when it did not (it expired
and another drain may hold it: this one stops without committing)
]]

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == 'renew' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
else
  redis.call('DEL', KEYS[1])
end
return 1
