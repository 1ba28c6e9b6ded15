#!lua
--[[
journal_point.lua: where a board's journal stands now (a move's round, docs/scaling.md#changing-
shards): every entry written so far has an id at most this, every entry written later a greater
one. The stream's last generated id (kept when the drain trims it). With no stream, one is made
empty by an entry trimmed in the same command (`MAXLEN 0`): its id is the point, and Redis gives
every later entry a greater one whatever its clock does (a failover to a node whose clock is
behind). Composed with the reads' prelude alone: no write of a board is recorded here.

KEYS[1]  the board's journal stream

Reply: a stream id
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then return info[i + 1] end
  end
end
return redis.call('XADD', KEYS[1], 'MAXLEN', '0', '*', 'point', '')
