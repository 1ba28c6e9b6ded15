#!lua
--[[
put_profile.lua: replaces a user's profile whole and journals the change in the same call
(docs/journal.md#profiles): a change that fails journals nothing, and concurrent changes are
journaled in the order Redis applied them. Every key is checked before the first write.

KEYS[1]  the user's profile (hash), in their profile shard's slot
KEYS[2]  the shard's journal (stream)
KEYS[3]  the shard's restore claims (hash, docs/journal.md#restore): while a restore of the
         shard runs, this change is newer than any line it applies, so the restore must leave
         the profile as this call leaves it (claimed "0": intact)

ARGV[1]  "put" (replace), or "move": write only when KEYS[1] does not exist (the drain moving
         a profile of the layout before shards; a change made since wins)
ARGV[2]  the journal entry ('' when the deployment journals nothing: KEYS[2] is not written)
ARGV[3..] field, value pairs (none: the profile is cleared)

Reply: 1 written, 0 not (a move finding the profile there)
]]

local function expect_type(key, kind)
  local held = raw_redis.call('TYPE', key)['ok']
  if held ~= 'none' and held ~= kind then
    error({err = 'WRONGTYPE a profile key holds a ' .. held})
  end
end

expect_type(KEYS[1], 'hash')
expect_type(KEYS[2], 'stream')
expect_type(KEYS[3], 'hash')
if ARGV[1] == 'move' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
-- The profiles' journal has no guard: named in its place, it records JSON.
effects_begin(ARGV[2] ~= '' and KEYS[2], KEYS[2])
redis.call('DEL', KEYS[1])
if #ARGV > 2 then redis.call('HSET', KEYS[1], unpack(ARGV, 3)) end
journal(KEYS[2], ARGV[2], '')
-- Not a recorded effect: the restore's own bookkeeping.
if raw_redis.call('EXISTS', KEYS[3]) == 1 then raw_redis.call('HSET', KEYS[3], KEYS[1], '0') end
return 1
