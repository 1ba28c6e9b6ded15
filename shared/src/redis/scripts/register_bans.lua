#!lua
--[[
register_bans.lua: the deployment's record of its banned users (docs/moderation.md), in the
runtime boards' catalog's slot and journaled in the catalog's journal (a restore brings it back
with the catalog): what a board defined after a ban carries onto itself. A ban is recorded
before it reaches the boards, an unban before it leaves them. Every key is checked before the
first write.

KEYS[1]  banned users (hash: user -> when the ban was recorded, ms; and the field SEEDED once
         the bans made before the record existed were recorded)
KEYS[2]  the catalog's journal (stream)
KEYS[3]  the catalog's guard (hash): a lost catalog refuses until it is restored

ARGV[1]  "ban", "unban" or "seed" (bans found on the boards, recorded once)
ARGV[2]  now (ms)
ARGV[3]  the journal entry ('' when the deployment journals nothing)
ARGV[4]  the seed's marker field
ARGV[5..] the users

Reply: the users whose record this call changed; a seed after the first: nothing
]]

writable(KEYS[1], 'hash')
writable(KEYS[2], 'stream')
writable(KEYS[3], 'hash')
-- Before the fence's check, which refuses only a journaled call (a lost catalog's record must
-- take nothing: its restore would take the new record for the whole one).
effects_begin(ARGV[3] ~= '' and KEYS[2], KEYS[3])
fence_check(KEYS[3])
local op, changed = ARGV[1], {}
if op == 'seed' and redis.call('HEXISTS', KEYS[1], ARGV[4]) == 1 then return changed end
for i = 5, #ARGV do
  local user = ARGV[i]
  if op == 'unban' then
    if redis.call('HDEL', KEYS[1], user) == 1 then changed[#changed + 1] = user end
  elseif redis.call('HSETNX', KEYS[1], user, ARGV[2]) == 1 then
    changed[#changed + 1] = user
  end
end
if op == 'seed' then redis.call('HSET', KEYS[1], ARGV[4], ARGV[2]) end
if #changed > 0 or op == 'seed' then journal(KEYS[2], ARGV[3], op) end
return changed
