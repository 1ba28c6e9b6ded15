#!lua
--[[
mark_born.lua: marks a board new, its first writes free to go ahead (docs/journal.md#fence), once
the caller found the journal bucket holding nothing of it: only if Redis holds no sign of a
history either, checked here in the same step as the mark, so a board whose guard alone was lost
(a bad DEL) while its stream still holds its writes, or one being restored, is never taken for new.
A stream that exists is a sign even when empty: a drain that stored the board's entries and
trimmed them between the caller's listing and this mark leaves the key (XTRIM keeps an emptied
stream), and no write creates a stream for a board not born.

KEYS[1]  the board's guard
KEYS[2]  the board's journal stream

ARGV[1]  '' for a board's layout; for a layout a move is due to take it to, the guard's field
         that says so (guard.rs `TARGET`), set with the mark: born, it is not a new board
ARGV[2]  that field's value: the layout record of where the board's data is

Reply: 1 when marked now, 0 when already born, 2 when Redis holds signs of a history (a fence,
       a loss, a drained entry, a stream): left as it is
]]
local guard = redis.call('HMGET', KEYS[1], GUARD_BORN, GUARD_FENCE, GUARD_LOST, GUARD_DRAINED)
if guard[1] then return 0 end
if guard[2] or guard[3] or guard[4] or redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], GUARD_BORN, 1, ARGV[1], ARGV[2])
else
  redis.call('HSET', KEYS[1], GUARD_BORN, 1)
end
return 1
