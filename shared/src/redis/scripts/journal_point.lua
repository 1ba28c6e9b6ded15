#!lua
--[[
journal_point.lua: where a board's journal stands now (a move's starting point,
docs/scaling.md#changing-shards): every entry written so far has an id at most this, every
entry written later a greater one. The stream's last generated id (kept when the drain trims
it); with no stream, the millisecond before now on this node's clock, whose next entry (a new
stream) gets an id of now or later.

KEYS[1]  the board's journal stream

Reply: a stream id
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then return info[i + 1] end
  end
end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
return string.format('%.0f-18446744073709551615', ms - 1)
