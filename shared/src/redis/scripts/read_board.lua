#!lua flags=no-writes
--[[
read_board.lua: one consistent read of a board in one round trip: its size, a window of
entries, and for every entry how many members have strictly more points (competition rank).
Read-only (`no-writes`): allowed on replicas and while the server is out of memory.

KEYS[1]  the board's sorted set (composite scores, see tiebreak.rs)
KEYS[2]  the board's guard on a journaled deployment, or for a season's live set (absent: no
         journal, another period): a board being restored, or lost, answers BOARD_RESTORING
         (docs/journal.md#fence), a season the archive closed PERIOD_CLOSED
         (docs/archival.md#live-routes)

ARGV[1]  time parts per point: the board's composite span (SPAN, or SCORE_SPAN on a score
         board, where "points" are values: higher is better whatever the board's order)
ARGV[2]  "page" or "member"
ARGV[3]  page: 0-based offset          member: the member id
ARGV[4]  page: limit                   member: entries on each side ("around")
ARGV[5]  now (ms, the function's clock): a period set the guard records as live then and
         missing was lost (prelude_read.lua `read_fence`); 0: no journal, the close alone

Reply: {total, rank, below, start, entries}
  total    ZCARD
  rank     member mode: the member's 0-based rank (highest first), -1 when absent; page mode: -1
  below    member mode: members with strictly fewer points than the member; otherwise -1
  start    0-based rank of the first entry
  entries  member, composite, above for each entry of the window, highest first, in one flat
           array (3 values per entry: returning a table per entry costs Redis more than the rest
           of the read), where `above` counts members with strictly more points. In member mode
           the window has 2 * around + 1 entries around the member, shifted (not clipped) at
           either end.
]]

read_fence(KEYS[2], KEYS[1], ARGV[5])
local key = KEYS[1]
span = tonumber(ARGV[1])
local total = redis.call('ZCARD', key)

local start, stop, rank, below = 0, -1, -1, -1
if ARGV[2] == 'page' then
  start = tonumber(ARGV[3])
  stop = start + tonumber(ARGV[4]) - 1
else
  local found = redis.call('ZREVRANK', key, ARGV[3])
  if found then
    rank = found
    local width = 2 * tonumber(ARGV[4]) + 1
    start = math.max(0, math.min(rank - tonumber(ARGV[4]), total - width))
    stop = start + width - 1
    local points = points_of(redis.call('ZSCORE', key, ARGV[3]))
    below = redis.call('ZCOUNT', key, '-inf', '(' .. composite_of(points, 0))
  end
end

local entries = {}
if start < total and stop >= start then
  local range = redis.call('ZREVRANGE', key, start, stop, 'WITHSCORES')
  local previous, above = nil, 0
  for i = 1, #range, 2 do
    local points = points_of(range[i + 1])
    if previous == nil then
      above = redis.call('ZCOUNT', key, composite_of(points + 1, 0), '+inf')
    elseif points ~= previous then
      -- The window is in rank order: everyone ranked before an entry with fewer points than
      -- the entry before it has more points than it. One ZCOUNT per read, not per entry.
      above = start + (i - 1) / 2
    end
    previous = points
    entries[#entries + 1] = range[i]
    entries[#entries + 1] = range[i + 1]
    entries[#entries + 1] = above
  end
end
return {total, rank, below, start, entries}
