#!lua
--[[
notices_commit.lua: what a notification drain sent, committed only while it still holds the
board's lease (docs/notifications.md): the quiet time's held windows that changed and the
stream trimmed through the last entry sent or merged, atomically. A drain whose lease ran out
(a slow bus) commits nothing: the drain that holds it now reads the same entries again, so
nothing it decided is overwritten by an older decision.

KEYS[1]  the board's notices lock (string: the holding drain's token)
KEYS[2]  the board's held windows (hash: user -> JSON windows)
KEYS[3]  the board's notices (stream)
KEYS[4]  the drain's count of the notices (hash): "delivered" grows by the entries trimmed

ARGV[1]  the drain's token
ARGV[2]  the first stream id to keep (XTRIM MINID), "" to trim nothing
ARGV[3..] pairs: user, the user's windows as JSON ("" deletes the user's field)

Reply: 1 committed, 0 the lease is not this drain's (nothing written)
]]

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
writable(KEYS[2], 'hash')
writable(KEYS[3], 'stream')
writable(KEYS[4], 'hash')
for i = 3, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[2], ARGV[i])
  else
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
if ARGV[2] ~= '' then
  local trimmed = redis.call('XTRIM', KEYS[3], 'MINID', ARGV[2])
  if trimmed > 0 then redis.call('HINCRBY', KEYS[4], 'delivered', trimmed) end
end
return 1
