#!lua
--[[
release_instance.lua: frees an ended tournament instance once its results are stored
(docs/tournaments.md#the-end): its live board (the freeze moved it aside), its players and its
attempts, keeping its size; journaled in the same call, so a restore brings the instance back
released and closed, as it was, instead of open with its board and seats. Every key is checked
before the first write. A run again finds nothing left and writes nothing.

KEYS[1]  the tournament board's guard (hash): the instance's closed field stays
KEYS[2]  the instance's live board (sorted set; gone since the freeze, written only as deleted)
KEYS[3]  the instance's players (set)
KEYS[4]  the instance's attempts (hash)
KEYS[5]  the instance's kept size (string)
KEYS[6]  the board's journal (stream, docs/journal.md)

ARGV[1]  the instance's closed field in the guard, "closed|<kind>:<id>"
ARGV[2]  its live field, "live|<kind>:<id>"
ARGV[3]  its emptied field, "emptied|<kind>:<id>"
ARGV[4]  seconds the kept size lives from now ("0": no TTL)
ARGV[5]  the journal entry ('' when the deployment journals nothing)

Reply: 1 when it freed the instance, 0 when nothing was left to free; an error when the
instance was not frozen (nothing written)
]]

local GUARD, BOARD, PLAYERS, ENTRIES, SIZE, JOURNAL = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local closed = redis.call('HGET', GUARD, ARGV[1])
if not closed then return redis.error_reply('ERR release_instance: the instance is not frozen') end
local players = redis.call('SCARD', PLAYERS)
if players == 0 and redis.call('EXISTS', ENTRIES) == 0 and redis.call('EXISTS', BOARD) == 0 then return 0 end
writable(BOARD, 'zset')
writable(ENTRIES, 'hash')
writable(SIZE, 'string')
if ARGV[5] ~= '' then writable(JOURNAL, 'stream') end
effects_begin(ARGV[5] ~= '' and JOURNAL, KEYS[1])
-- The guard as the freeze left it, recorded: a restore closes the instance again.
redis.call('HSET', GUARD, ARGV[1], closed)
-- With the instance's kept| record (the freeze dropped it, unjournaled): a restore replays the
-- scores that recorded it, then this.
redis.call('HDEL', GUARD, ARGV[2], ARGV[3], GUARD_KEPT .. string.sub(ARGV[1], #GUARD_CLOSED + 1))
if players > 0 then
  redis.call('SET', SIZE, players)
  expire_once(SIZE, ARGV[4])
end
redis.call('DEL', BOARD)
redis.call('DEL', PLAYERS)
redis.call('DEL', ENTRIES)
journal(JOURNAL, ARGV[5], 'released')
return 1
