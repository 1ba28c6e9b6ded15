#!lua
--[[
correct_score.lua: an admin's correction of one user's entry on some periods of one board (the
current ones, or a past period and the periods containing it), with its audit entry, exactly
once per correction id, atomically. All checks happen before the first write. On a points
board it adds points; on a score board it adds to a sum, sets the kept score, or removes the
entry.

KEYS[1]    the board's guard (hash): "ban|<user>", "closed|<kind>:<id>" (see apply_event.lua)
KEYS[2]    the board's audit log (list, newest first)
KEYS[3]    the correction's marker: string "<fingerprint>\n<audit entry>\n<periods JSON>",
           kept ARGV[7] seconds
KEYS[4]    the board's journal (stream, docs/journal.md)
KEYS[5..]  the n period sorted sets to correct, scored with the tie-break composite; then,
           when ARGV[8] is 1, the member's statement of each of those periods (hash, see
           apply_event.lua), where the correction is itemised as "c:<correction id>" ->
           "<points changed in that period, summed over applications>|<reason>"; then, when
           ARGV[15] is not "", for each league period it names, the league's keys of that
           period as apply_event.lua lists them (nine) and the period's results (hash): a
           correction that leaves the member on a league period's board places them in a cohort
           as a first write does (prelude_league.lua), unless the period's close has begun (its
           results exist); one that moves a placed member keeps (or records) their cohort's
           order; then the arrivals of each watched period (prelude.lua `record_move`); then,
           when ARGV[19] is not
           "", the board's notices (stream, docs/notifications.md)

ARGV[1]    member (user id)
ARGV[2]    the operand: the change in values ("add"), the value ("set"), unused ("remove")
ARGV[3]    "add", "set" or "remove"
ARGV[4]    audit entry (JSON)
ARGV[5]    audit log length kept
ARGV[6]    payload fingerprint of the correction
ARGV[7]    marker TTL in seconds
ARGV[8]    1 when the board keeps statements, else 0
ARGV[9]    the correction's statement field ("c:<correction id>")
ARGV[10]   the correction's reason
ARGV[11]   "points" (a rule board: 0 points leave the board), "desc" or "asc" (a score
           board, where the value is the score, or max - score on an "asc" board; a score of 0
           stays)
ARGV[12]   the board's span: its composites are value * span + time part (tiebreak.rs)
ARGV[13]   the board's largest value (MAX_POINTS, or the score board's max_score)
ARGV[14]   the correction's journal entry (its audit entry), appended with the reply when the
           correction applies now; "" when the journal is off
ARGV[15]   which of the n periods are the board's league periods (positions, comma-separated;
           "": none; a removal in the grace after midnight holds two days, docs/leagues.md)
ARGV[16]   the league's cohort size, ARGV[17] its top tier (with league periods); ARGV[18] now (ms)
ARGV[19]   the correction as notifications name it (its id); "" when the board records no
           rank moves. An applied correction records its rank moves as apply_event.lua does
ARGV[20..] for each period, in KEYS order: period kind, period id, TTL in seconds ("0": none),
           time part of a score reached now in that period, the top watched ("0": none), the
           index in KEYS of its arrivals ("0": not watched)

Values go up when an entry gets better. One that gets better is reached now; one that gets
worse keeps the member's reached-at time (they held at least that since then), as a take-back
does. An absent member's value before an "add" is that of a score of 0.

Reply: a three-element array {status, entry, periods}
  {"new", entry, json}  json: [{"period":s,"period_id":s,"score":n?,"delta":n,"rank":n?,
                        "removed":true?}] (no score and no rank once the entry is removed)
  {"duplicate", entry, json}  this correction id was seen with this payload: the first answer
  {"conflict", "", ""}        this correction id was seen with another payload; nothing written
  {"banned", "", ""}          the user is banned from this board; nothing written
  {"period_closed", id, ""}   a period to correct is frozen (archived); nothing written
  {"out_of_range", "", ""}    a score would go below 0 or past the composite's range; nothing
                              written
]]

effects_begin(ARGV[14] ~= '' and KEYS[4], KEYS[1])

local marker = redis.call('GET', KEYS[3])
if marker then
  local first = string.find(marker, '\n', 1, true)
  if string.sub(marker, 1, first - 1) ~= ARGV[6] then return {'conflict', '', ''} end
  local second = string.find(marker, '\n', first + 1, true)
  return {'duplicate', string.sub(marker, first + 1, second - 1), string.sub(marker, second + 1)}
end

local member, operand, mode, scale = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[11]
local FIRST_BOARD = 5
local statements = ARGV[8] == '1'
local notice = ARGV[19]
-- The notices are the last key, when there are any (`notice` names the write).
local NOTICES = KEYS[#KEYS]
local noticed = notice ~= ''
local LEAGUE_KEYS = 10
-- The league periods, and the index in KEYS of each one's placements (the rest follow it).
local leagues, league_at = {}, {}
for at in string.gmatch(ARGV[15], '%d+') do leagues[#leagues + 1] = tonumber(at) end
local boards = (#ARGV - 19) / 6
for j, i in ipairs(leagues) do league_at[i] = FIRST_BOARD + boards * (statements and 2 or 1) + LEAGUE_KEYS * (j - 1) end
local function period(i, part) return ARGV[20 + 6 * (i - 1) + part] end
local points_board = scale == 'points'
span = tonumber(ARGV[12])
local max_value = tonumber(ARGV[13])
local zero = scale == 'asc' and max_value or 0
-- The score clients see of a value.
local function score_of(value) return scale == 'asc' and max_value - value or value end

local refusal, closed = guard_refusal(KEYS[1], member, boards, function(i) return period(i, 0) end, function(i) return period(i, 1) end)
if refusal then return {refusal, closed, ''} end

local composites, values, watched = {}, {}, {}
for i = 1, boards do
  composites[i] = redis.call('ZSCORE', KEYS[FIRST_BOARD - 1 + i], member)
  if not composites[i] then fence_if_lost(KEYS[1], KEYS[FIRST_BOARD - 1 + i], period(i, 0), period(i, 1), tonumber(ARGV[18])) end
  watched[i] = noticed and tonumber(period(i, 4)) > 0
  local held = composites[i] and points_of(composites[i])
  if mode == 'add' then
    values[i] = (held or zero) + operand
  elseif mode == 'set' then
    values[i] = operand
  else
    values[i] = false
  end
  if values[i] and (values[i] < 0 or values[i] > max_value) then return {'out_of_range', '', ''} end
  -- A points board keeps no one at 0 points.
  if points_board and values[i] == 0 then values[i] = false end
end

-- Every key written below that no check above has read (prelude.lua `writable`).
writable(KEYS[2], 'list')
if ARGV[14] ~= '' then writable(KEYS[4], 'stream') end
if statements then
  for i = 1, boards do writable(KEYS[FIRST_BOARD - 1 + boards + i], 'hash') end
end
if noticed then writable(NOTICES, 'stream') end
for i = 1, boards do
  if watched[i] then countable(KEYS[tonumber(period(i, 5))], '#') end
end
local LEAGUE_TYPES = {'hash', 'zset', 'hash', 'hash', 'zset', 'hash', 'zset', 'hash', 'zset', 'hash'}
for _, i in ipairs(leagues) do
  for k, kind in ipairs(LEAGUE_TYPES) do writable(KEYS[league_at[i] + k - 1], kind) end
end

-- `changed[i]`: the member's entry of period i moved (a removed 0 is a change with no delta:
-- on a score board 0 is a score, and its holder leaves the board).
local periods, changed = {}, {}
for i = 1, boards do
  local key = KEYS[FIRST_BOARD - 1 + i]
  local held = composites[i] and points_of(composites[i])
  local before = held and score_of(held) or 0
  local entry = {period = period(i, 0), period_id = period(i, 1)}
  if values[i] then
    if values[i] ~= held then
      changed[i] = true
      local better = not held or values[i] > held
      local time_part = better and tonumber(period(i, 3)) or tonumber(composites[i]) % span
      local fresh = effects and redis.call('EXISTS', key) == 0
      redis.call('ZADD', key, composite_of(values[i], time_part), member)
      expire_period_once(key, KEYS[1], period(i, 0), period(i, 1), period(i, 2))
      -- A journaled correction that creates a period's set records it as a write does, so its
      -- loss is found (prelude.lua `period_state`).
      if fresh then period_kept(KEYS[1], period(i, 0), period(i, 1), period(i, 2), tonumber(ARGV[18])) end
    end
    entry.score = score_of(values[i])
    entry.delta = entry.score - before
    entry.rank = redis.call('ZREVRANK', key, member) + 1
  else
    if held then
      remove_member(key, KEYS[1], period(i, 0), period(i, 1), member)
      changed[i] = true
    end
    -- 0 - before, not -before: a member absent from a period has 0, and -0 is not a JSON integer.
    entry.delta = 0 - before
    if points_board then entry.score = 0 else entry.removed = true end
  end
  if statements then
    local statement = KEYS[FIRST_BOARD - 1 + boards + i]
    if not values[i] and not points_board then
      -- A removed entry leaves nothing to explain.
      redis.call('UNLINK', statement)
    elseif entry.delta ~= 0 then
      -- A retry after the marker expired (48 h) applies again: its line adds up, so the
      -- statement still explains the score.
      local earlier = redis.call('HGET', statement, ARGV[9])
      local total = entry.delta + (earlier and tonumber(string.match(earlier, '^(-?%d+)')) or 0)
      redis.call('HSET', statement, ARGV[9], total .. '|' .. ARGV[10])
      expire_once(statement, period(i, 2))
    end
  end
  periods[i] = entry
end
-- Each league period's cohort move: placed (a first score), kept in order, or recorded.
local moves = {}
for _, l in ipairs(leagues) do
  local at, joined, cohort = league_at[l], false, nil
  -- Not once the period's close has begun (its results exist): its cohorts are being closed.
  if values[l] and redis.call('EXISTS', KEYS[at + 9]) == 0 then
    joined, cohort = league_place(KEYS[at], KEYS[at + 1], KEYS[at + 2], KEYS[at + 3], KEYS[at + 4], KEYS[at + 5],
      KEYS[at + 6], KEYS[at + 7], member, tonumber(ARGV[16]), tonumber(ARGV[17]), period(l, 2), tonumber(ARGV[18]))
  end
  -- The cohort's order (prelude_league.lua `order_sync`), or `record_cohort` below keeps it. On a
  -- score board 0 is a score: the entry follows the composite, whatever the delta.
  local after = redis.call('ZSCORE', KEYS[FIRST_BOARD - 1 + l], member)
  if joined or after ~= composites[l] then
    if watched[l] and changed[l] then
      record_cohort(moves, 'L', KEYS[FIRST_BOARD - 1 + l], KEYS[at], KEYS[at + 1], KEYS[at + 8], period(l, 0), period(l, 1),
        member, tonumber(composites[l]) or 0, joined, cohort, nil, after)
    else
      cohort = cohort or redis.call('HGET', KEYS[at], member)
      order_sync(KEYS[at + 8], cohort, member, composites[l], after, nil, joined)
    end
  end
end
if noticed then
  -- Rank moves, as any write that moves its member records them (prelude.lua).
  local top_moves = {}
  for i = 1, boards do
    if watched[i] and changed[i] then
      record_move(top_moves, 'T', KEYS[FIRST_BOARD - 1 + i], period(i, 0), period(i, 1), tonumber(period(i, 4)), member,
        composites[i], KEYS[tonumber(period(i, 5))])
    end
  end
  for _, move in ipairs(moves) do top_moves[#top_moves + 1] = move end
  record_moves(NOTICES, notice, top_moves)
end
redis.call('LPUSH', KEYS[2], ARGV[4])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[5]) - 1)
local reply = cjson.encode(periods)
redis.call('SET', KEYS[3], ARGV[6] .. '\n' .. ARGV[4] .. '\n' .. reply, 'EX', ARGV[7])
journal(KEYS[4], ARGV[14], reply)
return {'new', ARGV[4], reply}
