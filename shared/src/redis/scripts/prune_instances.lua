#!lua
--[[
prune_instances.lua: forgets a recurring tournament's records of instances that ended long ago
(docs/tournaments.md#the-end): each one's `closed|` field in the guard, which its release kept
so a restore closes it again, is needed by no reader once the instance's keys have expired (a
write lands in the open instance only, its results are in the table). Without this a schedule
every 15 minutes grows its guard by 35,000 fields a year. Journaled in the same call (a
`prune` record, its effects only), so a restore that replays the instances' releases forgets
them again. A run again removes nothing and moves the mark to where it was.

KEYS[1]  the tournament board's guard (hash)
KEYS[2]  the board's journal (stream, docs/journal.md)

ARGV[1]  the journal entry ('' when the deployment journals nothing)
ARGV[2]  the guard's mark of where the prune stands, "pruned"
ARGV[3]  its value: the end of the last instance forgotten (Unix ms)
ARGV[4..] the instances' closed fields, "closed|<kind>:<id>"

A journaled board whose guard is lost (not born) or fenced is left alone, as release_season.lua:
writing into it would make a lost guard look intact; the next run forgets them once it is restored.

Reply: how many fields it removed; -1 when the board is lost or fenced (nothing written)
]]

local GUARD, JOURNAL = KEYS[1], KEYS[2]
if ARGV[1] ~= '' then
  local state = redis.call('HMGET', GUARD, GUARD_BORN, GUARD_FENCE)
  if state[2] or not state[1] then return -1 end
  writable(JOURNAL, 'stream')
end
writable(GUARD, 'hash')
effects_begin(ARGV[1] ~= '' and JOURNAL, GUARD)
local removed = redis.call('HDEL', GUARD, unpack(ARGV, 4))
redis.call('HSET', GUARD, ARGV[2], ARGV[3])
journal(JOURNAL, ARGV[1], 'pruned')
return removed
