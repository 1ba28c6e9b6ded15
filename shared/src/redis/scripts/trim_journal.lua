#!lua
--[[
trim_journal.lua: trims a board's journal through what a drain stored in S3, unless a restore
of the board holds its lock (docs/journal.md#the-drain). A restore reads the objects it listed,
then the stream's tail: an object stored after its list, with the tail trimmed, would be read by
neither, and those lines lost while the restore answers complete. Refused, the drain leaves the
tail in the stream for the restore, and trims it on a later run (its object stored already).

KEYS[1]  the board's journal (stream)
KEYS[2]  the board's restore lock

ARGV[1]  the oldest stream id to keep (XTRIM MINID, exact)

Reply: the entries trimmed, or -1 when a restore holds the lock (nothing trimmed)
]]

if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
return redis.call('XTRIM', KEYS[1], 'MINID', ARGV[1])
