#!lua
--[[
synthesize_hot.lua: rebuild a window board from its hourly buckets for one minute, once.

The buckets are merged with their weights into KEYS[2] and swapped in with RENAME; an empty
union (no heat in the whole window) leaves no KEYS[2], so the board is deleted instead. The
board gets a short TTL: if runs stop, it disappears rather than showing stale heat forever.

The run's minute is the guard. A run for a minute before the last synthesized one is stale
(a late retry must not move the board back in time); a run for the same minute is a duplicate
and does nothing, unless that minute's board has since vanished (evicted or deleted) while it
had members, in which case the same window is rebuilt.

KEYS[1]    the board readers see (sorted set, item -> weighted heat)
KEYS[2]    scratch key the next board is built in
KEYS[3]    meta hash: synthesized_at (unix seconds of the run's minute), members
KEYS[4..]  the window's hourly buckets, newest first

ARGV[1]    the run's minute, unix seconds
ARGV[2]    TTL of the board, seconds
ARGV[3]    TTL of the meta hash, seconds
ARGV[4..]  one weight per bucket, in KEYS order

Reply: {status, members}
  {"new", n}          the board now holds n items (0: deleted, the window is empty)
  {"duplicate", n}    this minute was already synthesized; the board holds n items
  {"stale", n}        a later minute was already synthesized; the board holds n items
]]

local board, next_board, meta = KEYS[1], KEYS[2], KEYS[3]
local minute = tonumber(ARGV[1])

local last = redis.call('HMGET', meta, 'synthesized_at', 'members')
local last_minute = tonumber(last[1])
if last_minute then
  local present = redis.call('ZCARD', board)
  if minute < last_minute then
    return {'stale', present}
  end
  if minute == last_minute and (present > 0 or last[2] == '0') then
    return {'duplicate', present}
  end
end

local buckets = #KEYS - 3
local union = {'ZUNIONSTORE', next_board, buckets}
for i = 1, buckets do
  union[#union + 1] = KEYS[3 + i]
end
union[#union + 1] = 'WEIGHTS'
for i = 1, buckets do
  union[#union + 1] = ARGV[3 + i]
end
local members = redis.call(unpack(union))

if members > 0 then
  redis.call('RENAME', next_board, board)
  redis.call('EXPIRE', board, ARGV[2])
else
  -- ZUNIONSTORE stored nothing, so there is nothing to RENAME: the board is empty.
  redis.call('DEL', board)
end
redis.call('HSET', meta, 'synthesized_at', ARGV[1], 'members', members)
redis.call('EXPIRE', meta, ARGV[3])
return {'new', members}
