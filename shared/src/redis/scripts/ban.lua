#!lua
--[[
ban.lua: ban or unban a user on one board, with its audit entry, atomically.

A ban sets "ban|<user>" in the board's guard, so apply_event.lua and sign_in.lua refuse every
later write for the user on this board, and removes the user from the live period boards
given (periods frozen for archiving are left as they are). Because this is one script, an
event racing the ban either ran before it (and its points are removed here) or runs after
it (and is refused). An unban removes the guard field only: scores are not restored.

KEYS[1]    the board's guard (hash)
KEYS[2]    the board's audit log (list, newest first)
KEYS[3]    the board's journal (stream, docs/journal.md)
KEYS[4]    the board's notices (stream, docs/notifications.md)
KEYS[5..]  ban only: the board's n live period sorted sets; then, on a board that keeps
           statements, the user's statement of each of them (deleted with the score, so a
           statement never explains points the user no longer has); then the arrivals of each
           watched period (hash, prelude.lua `record_move`); then, on a league board,
           for each of the m live league periods its placements, cohorts, waiting players and
           cohorts in order (the user leaves their cohort, docs/leagues.md); then, "ban+seats"
           only (a tournament's board), the players (set) of each of the n live periods: the
           user's seat in each instance not frozen is freed

ARGV[1]    member (user id)
ARGV[2]    "ban", "ban+seats" or "unban"
ARGV[3]    audit entry (JSON); a ban also keeps it as the guard field's value
ARGV[4]    audit log length kept
ARGV[5]    the journal entry (the audit entry), appended with the periods the user was removed
           from ("<kind>:<id>", comma-separated); "" when the journal is off
ARGV[6]    m, the live league periods
ARGV[7..]  for each live period, in KEYS order: "<kind>:<id>"; then for each the top watched
           for notifications ("0": none); then for each the index in KEYS of its arrivals ("0":
           not watched); then for each of the m live league periods the position (1..n) of its
           sorted set among the live periods (so n = (#ARGV - 7 - m) / 3).
           Removing a member from a watched top records the move (prelude.lua's `record_move`,
           tagged so the banned user is told nothing); leaving a watched league period's
           cohort records the cohort without them (`BL`: those below move up, the zones shrink)
ARGV[#ARGV] the function's clock (ms): a live period set the guard records, gone before its
           expiry, is a loss: the board is fenced and the ban refused, nothing else written
           (prelude.lua `fence_if_lost`), so a restore never brings the user's points back
           under the ban nor leaves an emptied set recorded

Reply: the positions (1-based, in KEYS[5..] order) of the periods the user was removed from.
]]

-- The banned member's departure from their cohort (`BL`, docs/notifications.md): their place
-- before (from `was`, their composite then), and the cohort in order without them.
local function record_departure(moves, board, placements, cohorts, kind, id, member, was)
  local cohort = redis.call('HGET', placements, member)
  if not cohort then return end
  local names, others = redis.call('ZRANGEBYLEX', cohorts, cohort_range(cohort)), {}
  for i = 1, #names do
    local name = string.sub(names[i], #cohort + 2)
    if name ~= member then others[#others + 1] = name end
  end
  if #others == 0 then return end
  local composites, score = redis.call('ZMSCORE', board, unpack(others)), {}
  for i = 1, #others do score[others[i]] = composites[i] and tonumber(composites[i]) end
  local place = 0
  for i = 1, #others do
    if cohort_ahead(others[i], score[others[i]], member, was) then place = place + 1 end
  end
  table.sort(others, function(x, y) return cohort_ahead(x, score[x], y, score[y]) end)
  moves[#moves + 1] = table.concat({'BL', kind, id, cohort, member, place, table.concat(cohort_marked(others, score), ' ')}, ' ')
end

effects_begin(ARGV[5] ~= '' and KEYS[3], KEYS[1])
fence_check(KEYS[1])

local member = ARGV[1]
local removed, outcome, moves = {}, {}, {}
-- Every key written here, checked before the first write (prelude.lua `writable`).
writable(KEYS[1], 'hash')
writable(KEYS[2], 'list')
if ARGV[5] ~= '' then writable(KEYS[3], 'stream') end
-- This very call again: the store sends a script once more when its connection dropped before
-- the reply, and the first one ran. Its audit entry (its time and actor) heads the log: nothing
-- more is written, no second audit entry nor journal line.
if redis.call('LINDEX', KEYS[2], 0) == ARGV[3] then return {} end
if ARGV[2] ~= 'unban' then
  local m = tonumber(ARGV[6])
  local n = (#ARGV - 7 - m) / 3
  local seats = ARGV[2] == 'ban+seats' and n or 0
  local watched = 0
  for i = 1, n do
    if tonumber(ARGV[6 + n + i]) > 0 then watched = watched + 1 end
  end
  -- The live periods a league period is: their member's composite before the ban.
  local league_at, was = {}, {}
  for j = 1, m do
    local i = tonumber(ARGV[6 + 3 * n + j])
    if i > 0 then league_at[i] = true end
  end
  local statements = #KEYS == 4 + 2 * n + watched + 4 * m + seats
  -- The last of the league keys, before the seats'.
  local last = #KEYS - seats
  writable(KEYS[4], 'stream')
  for i = 1, seats do writable(KEYS[last + i], 'set') end
  for i = 1, n do
    writable(KEYS[4 + i], 'zset')
    if tonumber(ARGV[6 + n + i]) > 0 then countable(KEYS[tonumber(ARGV[6 + 2 * n + i])], '#') end
  end
  for j = 1, m do
    local at = last - 4 * (m - j)
    writable(KEYS[at - 3], 'hash')
    writable(KEYS[at - 2], 'zset')
    writable(KEYS[at - 1], 'zset')
    writable(KEYS[at], 'zset')
  end
  for i = 1, n do
    if redis.call('EXISTS', KEYS[4 + i]) == 0 then
      local kind, id = string.match(ARGV[6 + i], '^([^:]*):(.*)$')
      fence_if_lost(KEYS[1], KEYS[4 + i], kind, id, tonumber(ARGV[#ARGV]))
    end
  end
  redis.call('HSET', KEYS[1], GUARD_BAN .. member, ARGV[3])
  for i = 1, n do
    local frozen = redis.call('HEXISTS', KEYS[1], GUARD_CLOSED .. ARGV[6 + i]) == 1
    if not frozen then
      local kind, id = string.match(ARGV[6 + i], '^([^:]*):(.*)$')
      local key, top = KEYS[4 + i], tonumber(ARGV[6 + n + i])
      if league_at[i] or top > 0 then was[i] = redis.call('ZSCORE', key, member) end
      if remove_member(key, KEYS[1], kind, id, member) == 1 then
        removed[#removed + 1] = i
        outcome[#outcome + 1] = ARGV[6 + i]
        if top > 0 then record_move(moves, 'BT', key, kind, id, top, member, was[i], KEYS[tonumber(ARGV[6 + 2 * n + i])]) end
      end
      if statements then redis.call('UNLINK', KEYS[4 + n + i]) end
      if seats > 0 then redis.call('SREM', KEYS[last + i], member) end
    end
  end
  for j = 1, m do
    local at = last - 4 * (m - j)
    local placements, cohorts, waiting, order = KEYS[at - 3], KEYS[at - 2], KEYS[at - 1], KEYS[at]
    local i = tonumber(ARGV[6 + 3 * n + j])
    if i > 0 and was[i] and tonumber(ARGV[6 + n + i]) > 0 then
      local kind, id = string.match(ARGV[6 + i], '^([^:]*):(.*)$')
      record_departure(moves, KEYS[4 + i], placements, cohorts, kind, id, member, tonumber(was[i]))
    end
    league_leave(placements, cohorts, order, waiting, member, i > 0 and was[i])
  end
else
  redis.call('HDEL', KEYS[1], GUARD_BAN .. member)
end
redis.call('LPUSH', KEYS[2], ARGV[3])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[4]) - 1)
journal(KEYS[3], ARGV[5], table.concat(outcome, ','))
record_moves(KEYS[4], '', moves)
return removed
