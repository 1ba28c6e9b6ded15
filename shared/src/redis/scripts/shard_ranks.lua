#!lua flags=no-writes
--[[
shard_ranks.lua: one shard's part of a rank read on a board spread over shards (redis/sharded.rs):
counts ranked before probes, or a member's neighbourhood. One call a shard whatever the ties: a
tie is searched (a binary search by index), not fetched. Read-only.

KEYS[1]  the shard's sorted set of the period
KEYS[2]  the shard's guard on a journaled deployment, or for a season's live set (absent: no
         journal, another period): a shard being restored, or lost, answers BOARD_RESTORING
         (docs/journal.md#fence), a season the archive closed PERIOD_CLOSED

ARGV[1]  'counts', 'around' or 'after'
ARGV[2]  now (ms, the function's clock) for a read that also refuses a period set its guard
         says was lost (`read_fence`), '' for the guard's fence alone, or 0 (no journal) for a
         season's close alone
counts:  ARGV[3] the number of probes n, ARGV[4..] n probes as member, composite pairs, then
         floors (composites)
around:  ARGV[3] the member, ARGV[4] its composite, ARGV[5] a value floor (members strictly
         below it are counted), ARGV[6] width (the entries nearest before and after, at most
         this many each), ARGV[7] the scale's span (composites a value) for competition ranks,
         else ''

after:   ARGV[3] a cursor's member, ARGV[4] its composite, ARGV[5] limit: a keyset page

Reply:
  counts  {before, at_least}: the members ranked before each probe, at or above each floor
  around  {total, ranked before, below the floor, before, after, the member's composite or
          false, edge}; before and after as ZRANGE WITHSCORES gives them, the member left out;
          edge (with a span, when `before` holds `width` entries): the members with more points
          than the farthest of them (strictly greater value), else false
  after   {total, ranked at or before the cursor, entries}: the `limit` entries ranked next
          after the cursor's place (ZRANGE WITHSCORES order)
]]

local key = KEYS[1]
if KEYS[2] and ARGV[2] ~= '' then
  read_fence(KEYS[2], key, ARGV[2])
elseif KEYS[2] then
  local guard = redis.call('HMGET', KEYS[2], GUARD_BORN, GUARD_FENCE)
  if (guard[2] and guard[2] ~= GUARD_MOVING) or not guard[1] then error({err = 'BOARD_RESTORING the board is being restored from its journal'}) end
end

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

-- Whether `member` is at `composite` at ascending index `index`.
local function at(index, member, composite)
  if index < 0 then return false end
  local entry = redis.call('ZRANGE', key, index, index, 'WITHSCORES')
  return entry[1] == member and tonumber(entry[2]) == tonumber(composite)
end

if ARGV[1] == 'counts' then
  local n = tonumber(ARGV[3])
  local before, at_least = {}, {}
  for i = 1, n do
    before[i] = ranked_before(ARGV[2 * i + 3], ARGV[2 * i + 2])
  end
  for i = 2 * n + 4, #ARGV do
    at_least[#at_least + 1] = redis.call('ZCOUNT', key, ARGV[i], '+inf')
  end
  return {before, at_least}
end

local member = ARGV[3]
local count, first = ranked_before(ARGV[4], member)
-- The member itself, when at the probe, is the entry just below `first`.
local last = first - 1
if at(last, member, ARGV[4]) then last = last - 1 end
if ARGV[1] == 'after' then
  local limit, total = tonumber(ARGV[5]), redis.call('ZCARD', key)
  local entries = {}
  if last >= 0 then entries = redis.call('ZRANGE', key, math.max(0, last - limit + 1), last, 'WITHSCORES') end
  return {total, total - last - 1, entries}
end
local width = tonumber(ARGV[6])
local held = redis.call('ZSCORE', key, member)
local before, after = {}, {}
if width > 0 then
  before = redis.call('ZRANGE', key, first, first + width - 1, 'WITHSCORES')
  if last >= 0 then after = redis.call('ZRANGE', key, math.max(0, last - width + 1), last, 'WITHSCORES') end
end
-- The window's first entry may share the farthest entry's value with members beyond it: the
-- members above that value are counted here (sharded.rs, `competition_above`), not in a round more.
local edge = false
if ARGV[7] and ARGV[7] ~= '' and width > 0 and #before == 2 * width then
  local span = tonumber(ARGV[7])
  local floor = (math.floor(tonumber(before[#before]) / span) + 1) * span
  edge = redis.call('ZCOUNT', key, string.format('%.0f', floor), '+inf')
end
return {redis.call('ZCARD', key), count, redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[5]), before, after, held or false, edge}
