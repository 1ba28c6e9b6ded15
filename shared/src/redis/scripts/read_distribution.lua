#!lua flags=no-writes
--[[
read_distribution.lua: the shape of a board in one consistent read: its size, buckets of equal
width between its lowest and its highest points with the members in each, and the points at
the cut-off rank of each top share. O(buckets · log N): one ZCOUNT per bucket and one rank
lookup per share, never a scan. Read-only (`no-writes`): allowed on replicas and while the
server is out of memory.

KEYS[1]   the board's sorted set (composite scores, see tiebreak.rs)
KEYS[2]   the board's guard on a journaled deployment, or for a season's live set (see read_board.lua): a board being
          restored, or lost, answers BOARD_RESTORING (docs/journal.md#fence)

ARGV[1]   the board's composite span (see read_board.lua): on a score board "points" are
          values, higher is better, and the caller turns them back into scores
ARGV[2]   now (ms, the function's clock; see read_board.lua)
ARGV[3]   the most buckets wanted (fewer when the board spans fewer distinct points)
ARGV[4..] the top shares to cut at, in percent (1..=100)

Reply: {total, lowest, highest, width, counts, cutoffs}; all zeros and two empty arrays for
an empty board
  total     ZCARD
  lowest    the lowest points on the board; highest: the highest
  width     points per bucket: bucket i (0-based) holds lowest + i * width ..= lowest +
            (i + 1) * width - 1, the last one ends at highest; width = ceil(range / wanted),
            range = highest - lowest + 1, so there are ceil(range / width) buckets
  counts    members per bucket, lowest bucket first; they sum to total
  cutoffs   for each share p, in order: the points of the member at rank ceil(total * p / 100)
            (1-based, highest first), the lowest points still inside the top p %
]]

read_fence(KEYS[2], KEYS[1], ARGV[2])
local key = KEYS[1]
span = tonumber(ARGV[1])
local total = redis.call('ZCARD', key)
if total == 0 then return {0, 0, 0, 0, {}, {}} end

local lowest = points_of(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
local highest = points_of(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
local range = highest - lowest + 1
local width = math.floor((range + tonumber(ARGV[3]) - 1) / tonumber(ARGV[3]))

local counts = {}
for from = lowest, highest, width do
  -- Every composite of `from`..`from + width - 1` points: from its lowest time part up to,
  -- not including, the first composite of the next bucket's points.
  counts[#counts + 1] = redis.call('ZCOUNT', key, composite_of(from, 0), '(' .. composite_of(from + width, 0))
end

local cutoffs = {}
for i = 4, #ARGV do
  local rank = math.max(math.floor((total * tonumber(ARGV[i]) + 99) / 100), 1)
  cutoffs[#cutoffs + 1] = points_of(redis.call('ZREVRANGE', key, rank - 1, rank - 1, 'WITHSCORES')[2])
end
return {total, lowest, highest, width, counts, cutoffs}
