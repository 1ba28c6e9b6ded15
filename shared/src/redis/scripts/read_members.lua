#!lua flags=no-writes
--[[
read_members.lua: the standing of a given list of members on one board ("my friends"), in
one round trip, from one consistent snapshot. Read-only.

KEYS[1]  the board's sorted set (composite scores, see tiebreak.rs)
KEYS[2]  the board's guard on a journaled deployment, or for a season's live set (see read_board.lua): a board being
         restored, or lost, answers BOARD_RESTORING (docs/journal.md#fence)

ARGV[1]   the board's composite span (see read_board.lua)
ARGV[2]   now (ms, the function's clock; see read_board.lua)
ARGV[3..] member ids (distinct)

Reply: {total, standings}
  total      ZCARD
  standings  one {rank, composite, above} per member, in ARGV order: rank is the 0-based
             rank (highest first) or -1 when absent (then composite is "" and above is -1);
             above counts members with strictly more points (competition rank).
]]

read_fence(KEYS[2], KEYS[1], ARGV[2])
local key = KEYS[1]
span = tonumber(ARGV[1])
local above_points = {}
local standings = {}
for i = 3, #ARGV do
  local composite = redis.call('ZSCORE', key, ARGV[i])
  if composite then
    local points = points_of(composite)
    if not above_points[points] then
      above_points[points] = redis.call('ZCOUNT', key, composite_of(points + 1, 0), '+inf')
    end
    standings[i - 2] = {redis.call('ZREVRANK', key, ARGV[i]), composite, above_points[points]}
  else
    standings[i - 2] = {-1, '', -1}
  end
end
return {redis.call('ZCARD', key), standings}
