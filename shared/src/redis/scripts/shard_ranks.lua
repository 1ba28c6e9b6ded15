#!lua flags=no-writes
--[[
shard_ranks.lua: one shard's part of a rank read on a board spread over shards (redis/sharded.rs):
counts ranked before probes, or a member's neighbourhood. One call a shard whatever the ties: a
tie is searched (a binary search by index), not fetched. Read-only.

KEYS[1]  the shard's sorted set of the period
KEYS[2]  the shard's guard on a journaled deployment (absent: no journal): a shard being
         restored, or lost, answers BOARD_RESTORING (docs/journal.md#fence)

ARGV[1]  'counts' or 'around'
counts:  ARGV[2] the number of probes n, ARGV[3..] n probes as member, composite pairs, then
         floors (composites)
around:  ARGV[2] the member, ARGV[3] its composite, ARGV[4] a value floor (members strictly
         below it are counted), ARGV[5] width (the entries nearest before and after, at most
         this many each)

Reply:
  counts  {before, at_least}: the members ranked before each probe, at or above each floor
  around  {total, ranked before, below the floor, before, after, the member's composite or
          false}; before and after as ZRANGE WITHSCORES gives them, the member left out
]]

if KEYS[2] then
  local guard = redis.call('HMGET', KEYS[2], GUARD_BORN, GUARD_FENCE)
  if guard[2] or not guard[1] then error({err = 'BOARD_RESTORING the board is being restored from its journal'}) end
end
local key = KEYS[1]

-- Whether member `a` sorts after `b` as a sorted set orders equal scores: byte by byte (Lua's
-- `>` on strings follows the server's locale, which need not be byte order).
local function bytes_after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

-- Members ranked before `member` at `composite`: the higher composites, then the equal ones
-- with a greater id (ZREVRANGE order). Also the ascending index of the first of them.
local function ranked_before(composite, member)
  local low = redis.call('ZCOUNT', key, '-inf', '(' .. composite)
  local high = low + redis.call('ZCOUNT', key, composite, composite)
  while low < high do
    local mid = math.floor((low + high) / 2)
    if bytes_after(redis.call('ZRANGE', key, mid, mid)[1], member) then high = mid else low = mid + 1 end
  end
  return redis.call('ZCARD', key) - low, low
end

if ARGV[1] == 'counts' then
  local n = tonumber(ARGV[2])
  local before, at_least = {}, {}
  for i = 1, n do
    before[i] = ranked_before(ARGV[2 * i + 2], ARGV[2 * i + 1])
  end
  for i = 2 * n + 3, #ARGV do
    at_least[#at_least + 1] = redis.call('ZCOUNT', key, ARGV[i], '+inf')
  end
  return {before, at_least}
end

local member, width = ARGV[2], tonumber(ARGV[5])
local count, first = ranked_before(ARGV[3], member)
local held = redis.call('ZSCORE', key, member)
local before, after = {}, {}
if width > 0 then
  before = redis.call('ZRANGE', key, first, first + width - 1, 'WITHSCORES')
  -- The member itself, when at the probe, is the entry just below `first`.
  local from = first - 1
  if held and from >= 0 and redis.call('ZRANGE', key, from, from)[1] == member then from = from - 1 end
  if from >= 0 then after = redis.call('ZRANGE', key, math.max(0, from - width + 1), from, 'WITHSCORES') end
end
return {redis.call('ZCARD', key), count, redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[4]), before, after, held or false}
