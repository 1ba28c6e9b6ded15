#!lua
--[[
release_season.lua: records a season's release (docs/archival.md) once its frozen board and
statements are freed: journaled in the same call, so a restore, which replays the season's
writes, ends with the season closed and its set gone as it was, instead of live again and open
to corrections (the freeze itself is not journaled). Every key is checked before the first
write. A run again finds the season released and writes nothing. Run by every archive run that
finds the season archived, it also closes a season whose writes a restore brought back live.

KEYS[1]  the board's guard (hash): the season's closed field stays
KEYS[2]  the season's live set (sorted set; gone since the freeze, written only as deleted)
KEYS[3]  the season's arrivals (hash; deleted with the set)
KEYS[4]  the board's journal (stream, docs/journal.md)

ARGV[1]  the season's closed field in the guard, "closed|<kind>:<id>"
ARGV[2]  its live field, "live|<kind>:<id>"
ARGV[3]  its emptied field, "emptied|<kind>:<id>"
ARGV[4]  its released field, "released|<kind>:<id>"
ARGV[5]  the journal entry ('' when the deployment journals nothing)
ARGV[6]  the closed field's value when the season is archived and not closed in Redis (a
         restore of a journal without this line brought its writes back live): its members

A journaled board whose guard is lost (not born) or fenced is left alone: writing into it would
make a lost guard look intact; the archive's next run records the release once it is restored.

Reply: 1 when it recorded the release, 0 when it was recorded already or the board is lost
]]

local GUARD, BOARD, ARRIVALS, JOURNAL = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if ARGV[5] ~= '' then
  local state = redis.call('HMGET', GUARD, GUARD_BORN, GUARD_FENCE)
  if state[2] or not state[1] then return 0 end
end
-- "1": recorded; a reshard's "moved" is recorded (journaled in this shard) here.
if redis.call('HGET', GUARD, ARGV[4]) == '1' then return 0 end
local closed = redis.call('HGET', GUARD, ARGV[1]) or ARGV[6]
writable(BOARD, 'zset')
writable(ARRIVALS, 'hash')
if ARGV[5] ~= '' then writable(JOURNAL, 'stream') end
effects_begin(ARGV[5] ~= '' and JOURNAL, KEYS[1])
redis.call('HSET', GUARD, ARGV[1], closed, ARGV[4], 1)
redis.call('HDEL', GUARD, ARGV[2], ARGV[3], GUARD_KEPT .. string.sub(ARGV[1], #GUARD_CLOSED + 1))
redis.call('DEL', BOARD)
redis.call('DEL', ARRIVALS)
journal(JOURNAL, ARGV[5], 'released')
return 1
