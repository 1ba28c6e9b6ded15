#!lua
--[[
keep_scale.lua: keeps a one-slot board's copy of its scale record in its guard (`guard::SCALE`,
docs/boards.md#score-boards), in one step with the checks that make the guard the board's: it
exists (with a journal: it is born, as a guard written into after a loss is not), the board is
in its one slot (no layout record) and the record holds the scale copied. A guard a move's switch
freed meanwhile is never made again with the copy alone.

KEYS[1]  the board's guard (its one slot's)
KEYS[2]  the board's layout record
KEYS[3]  the board's scale record

ARGV[1]  the scale to copy
ARGV[2]  the guard's `born` field when the board is journaled (its guard must carry it); '':
         the guard must exist
ARGV[3]  the copy's field (`guard::SCALE`)

Reply: 1 when copied, 0 when left as it is

Run as it is (redis/layout.rs `KEEP_SCALE`), without the constants and the prelude.
]]
local own
if ARGV[2] ~= '' then
  own = redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1
else
  own = redis.call('EXISTS', KEYS[1]) == 1
end
if not own or redis.call('EXISTS', KEYS[2]) == 1 or redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[1])
return 1
