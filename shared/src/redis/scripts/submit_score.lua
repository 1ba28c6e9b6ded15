#!lua
--[[
submit_score.lua: apply a chunk of submitted scores to one score board, each exactly once, in
one round trip: every period keeps the best, the latest or the sum of a user's submissions. A
single submission is a chunk of one; a batch sends one call per chunk. Submissions are applied
in order, each atomically with everything before it (the same id twice is a duplicate).
Composed with the constants and prelude.lua's helpers (see `compose` in mod.rs). Scores are
handled as values (the score, or the board's max - score where lower is better), so in every
period a higher value is better and the sorted set holds value * span + time part (the board's
scale, scores.rs: span 2^23 and max MAX_SCORE unless the board declares a smaller max_score).

KEYS[1]    the board's guard (hash, see apply_event.lua)
KEYS[2..]  every other key the chunk touches, once each; ARGV names them by index

ARGV[1]    number of submissions in the chunk
ARGV[2]    seconds a marker bucket created now is kept
ARGV[3]    "best", "latest" or "sum"
ARGV[4]    1 when the board keeps statements, else 0
ARGV[5]    rate limit: submissions allowed in the window ("0": no limit)
ARGV[6]    rate limit window in ms
ARGV[7]    now in ms (the function's clock)
ARGV[8]    the board's span (time parts per value)
ARGV[9]    the board's largest value (its max_score)
ARGV[10]   the value of a zero score (where a sum starts)
ARGV[11]   index in KEYS of the board's journal (stream, docs/journal.md)
ARGV[12]   index in KEYS of the board's notices (stream, docs/notifications.md); "0": the
           board records no rank moves
ARGV[13]   index in KEYS of the tournament instance's players (set, docs/tournaments.md); "0":
           the board runs no tournament (ARGV[14..17] are then "0")
ARGV[14]   index in KEYS of the instance's entries (hash: member -> submissions applied; kept
           only where attempts are limited)
ARGV[15]   1 when a player must join before submitting; 0: a first submission joins them
ARGV[16]   the most players of the instance ("0": no cap)
ARGV[17]   the most submissions a player makes in the instance ("0": no limit)
then one block per submission, from ARGV[b] (b = 18 for the first):
b+0..2     indexes of the event-id marker buckets of the board's local day now (written), the
           day before and the day after ("0" unless near the day's end); shared with
           apply_event.lua
b+3, b+4   the first one's local day (days since 1970-01-01) and bucket shard: its bit in the
           guard's record of buckets (prelude_markers.lua)
b+5        index of the user's rate-limit log of score submissions on this board (sorted set)
b+6        marker field: 8 bytes of the event id's digest
b+7        payload fingerprint: 4 bytes of the payload's digest
b+8        member (user id)
b+9        refusal of a first delivery: "" (none), "too_late" or "in_future" (checked after
           the markers, so a retry within the window is a duplicate)
b+10       the submission's value
b+11       the submitted score
b+12       n, the number of periods
b+13       the submission's journal entry (JSON, journal.rs), appended with the receipt when
           it is applied now; "" when the journal is off
b+14       l, which of the n periods is the board's league period (docs/leagues.md); 0: none
b+15       the submission id as notifications name it; "" when the board records no rank moves
then n octuples from b+16: index of the period's sorted set, index of the member's statement
           of that period (a hash, see apply_event.lua: "n:score" submissions applied, "p:score"
           their sum on "sum" boards; "0" when the board keeps none), kind, id, TTL in seconds
           ("0": none), time part of a score reached now, the top watched for notifications
           ("0": none), index of its arrivals (prelude.lua `record_move`; "0" when not watched)
then, when l > 0, eleven: the indexes of the league's keys of that period, as apply_event.lua's
           block lists them, cohort size and the top tier. A submission that leaves the member
           on the league period's board places them in a cohort (prelude_league.lua). An applied
           submission records its rank moves as apply_event.lua does

Reply: per submission, in order, 2 + 2n values: status, detail, then for each period the
member's composite ("" when absent) and 1-based rank (0 when absent); empty for a refusal;
on a tournament's board one more: the member's submissions applied in the instance now (0
where attempts are not limited)
  "new", receipt            applied now; standing after it
  "duplicate", i..receipt   seen with this payload (i: the bucket that held it, 0 today, 1 the
                            day before, 2 the day after); the first receipt and standing now
  "conflict", ""            seen with another payload; nothing written
  "too_late"/"in_future", ""  a first delivery outside the event window; nothing written
  "banned", ""              the user is banned from this board; nothing written
  "period_closed", id       a period the submission lands in is frozen; nothing written
  "rate_limited", s         the limit is used up; a slot frees in s seconds; nothing written
  "out_of_range", ""        a sum would leave 0..=max in every period; nothing written
  "not_joined", ""          a tournament that needs a join, not joined; nothing written
  "tournament_full", size   a first submission to a full instance; nothing written
  "entry_limit", ""         the player's submissions are used up; nothing written
receipt: SCORE_KEPT or SCORE_NOT_BETTER (a "best" submission no period kept), then one
character per period: "1" when that period's entry changed, "0" when it did not, "o" when a
sum would have left 0..=max there (that period only is left as it was).
]]

local GUARD = KEYS[1]
local keep, statements = ARGV[3], ARGV[4] == '1'
local rate_max, rate_window, now_ms = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local board_span, max_value, zero = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local JOURNAL = KEYS[tonumber(ARGV[11])]
local NOTICES = KEYS[tonumber(ARGV[12])]
local PLAYERS, ENTRIES = KEYS[tonumber(ARGV[13])], KEYS[tonumber(ARGV[14])]
local join_required, max_size, max_entries = ARGV[15] == '1', tonumber(ARGV[16]), tonumber(ARGV[17])
-- The submission's player's attempts in the instance, once this call has read or written them.
local entries_now

-- One submission's block, from ARGV[b]: its status, detail and the periods' standing (nil for
-- a refusal).
local function submit(b)
  effects_begin(ARGV[b + 13] ~= '' and JOURNAL, GUARD)
  local field, fingerprint, member = ARGV[b + 6], ARGV[b + 7], ARGV[b + 8]
  local value, n = tonumber(ARGV[b + 10]), tonumber(ARGV[b + 12])
  -- The index in KEYS of period i's sorted set (part 0) or the member's statement (part 1).
  local function index(i, part) return tonumber(ARGV[b + 16 + 8 * (i - 1) + part]) end
  local function period(i, part) return ARGV[b + 16 + 8 * (i - 1) + part] end
  local notice = ARGV[b + 15]
  local bucket, rate_log = KEYS[tonumber(ARGV[b])], KEYS[tonumber(ARGV[b + 5])]

  local function standing()
    local composites, ranks = {}, {}
    for i = 1, n do
      local composite = redis.call('ZSCORE', KEYS[index(i, 0)], member)
      composites[i] = composite or ''
      ranks[i] = composite and redis.call('ZREVRANK', KEYS[index(i, 0)], member) + 1 or 0
    end
    return composites, ranks
  end

  local seen, gone = marker_seen(bucket, KEYS[tonumber(ARGV[b + 1])], KEYS[tonumber(ARGV[b + 2])], field, fingerprint)
  if seen == 'conflict' then return 'conflict', '' end
  if seen then return 'duplicate', seen, standing() end
  if ARGV[b + 9] ~= '' then return ARGV[b + 9], '' end
  local refusal, closed = guard_refusal(GUARD, member, n, function(i) return period(i, 2) end, function(i) return period(i, 3) end)
  if refusal then return refusal, closed end
  -- A marker bucket the guard records and the lookup found gone fences the board.
  local mark_day, mark_shard = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  local creates, marks = markers_check(GUARD, gone, mark_day, mark_shard)
  local wait = rate_wait(rate_log, rate_max, rate_window, now_ms)
  if wait then return 'rate_limited', tostring(wait) end
  -- A tournament's seat and attempts, in the same call as the score: exact under concurrency.
  local seated = true
  if PLAYERS then
    -- Both are read here, before any write: a key of another type fails the call unwritten.
    seated = redis.call('SISMEMBER', PLAYERS, member) == 1
    if not seated and join_required then return 'not_joined', '' end
    if not seated and max_size > 0 then
      local size = redis.call('SCARD', PLAYERS)
      if size >= max_size then return 'tournament_full', tostring(size) end
    end
    if max_entries > 0 then
      entries_now = tonumber(redis.call('HGET', ENTRIES, member) or '0')
      if entries_now >= max_entries then return 'entry_limit', '' end
    end
  end

  -- Every check before the first write: a refused submission leaves no trace. A sum that
  -- would leave the range is refused in that period only (flag "o"); in every period, the whole.
  local kept, flags, changed, fits, olds = {}, '', false, false, {}
  for i = 1, n do
    local held = redis.call('ZSCORE', KEYS[index(i, 0)], member)
    if not held then fence_if_lost(GUARD, KEYS[index(i, 0)], period(i, 2), period(i, 3), now_ms) end
    olds[i] = tonumber(held or '0')
    held = held and math.floor(tonumber(held) / board_span)
    local new = value
    if keep == 'best' and held then
      new = math.max(held, value)
    elseif keep == 'sum' then
      new = (held or zero) + value - zero
    end
    if new < 0 or new > max_value then
      kept[i] = false
      flags = flags .. 'o'
    else
      fits = true
      -- An equal value changes nothing: the member keeps the time they first reached it.
      kept[i] = new ~= held and new
      flags = flags .. (kept[i] and '1' or '0')
      changed = changed or kept[i] ~= false
    end
  end
  if not fits then return 'out_of_range', '' end

  -- Every key written below that no check above has read (prelude.lua `writable`).
  local league, at = tonumber(ARGV[b + 14]), b + 16 + 8 * n
  for i = 1, n do
    if statements and string.sub(flags, i, i) ~= 'o' then
      writable(KEYS[index(i, 1)], 'hash')
      countable(KEYS[index(i, 1)], 'n:score', 'p:score')
    end
    -- A watched period's arrivals (prelude.lua `record_move`): HMGET fails a key of another type.
    if notice ~= '' and kept[i] and index(i, 6) > 0 then countable(KEYS[index(i, 7)], '#') end
  end
  -- A placed member's write touches no league key but their cohort's order, whose mark is read
  -- here (a key of another type fails the call unwritten); a first write may place them.
  local cohort, order_held
  if league > 0 then
    cohort = redis.call('HGET', KEYS[tonumber(ARGV[at])], member)
    if cohort then
      order_held = redis.call('ZSCORE', KEYS[tonumber(ARGV[at + 8])], cohort .. '#')
    else
      writable(KEYS[tonumber(ARGV[at])], 'hash')
      writable(KEYS[tonumber(ARGV[at + 1])], 'zset')
      writable(KEYS[tonumber(ARGV[at + 2])], 'hash')
      writable(KEYS[tonumber(ARGV[at + 3])], 'hash')
      writable(KEYS[tonumber(ARGV[at + 4])], 'zset')
      writable(KEYS[tonumber(ARGV[at + 5])], 'hash')
      writable(KEYS[tonumber(ARGV[at + 6])], 'zset')
      writable(KEYS[tonumber(ARGV[at + 7])], 'hash')
      writable(KEYS[tonumber(ARGV[at + 8])], 'zset')
    end
  end
  if notice ~= '' then writable(NOTICES, 'stream') end
  if ARGV[b + 13] ~= '' then writable(JOURNAL, 'stream') end

  for i = 1, n do
    if kept[i] then
      -- A sum is reached when its last submission happened, never before the total it adds to
      -- was (an older queue message applied after a newer one): later is the smaller part.
      local part = tonumber(period(i, 5))
      if keep == 'sum' and olds[i] > 0 then part = math.min(part, olds[i] % board_span) end
      period_add(KEYS[index(i, 0)], GUARD, period(i, 2), period(i, 3), period(i, 4),
        string.format('%.0f', kept[i] * board_span + part), member, now_ms)
    end
    if statements and string.sub(flags, i, i) ~= 'o' then
      local statement = KEYS[index(i, 1)]
      redis.call('HINCRBY', statement, 'n:score', 1)
      if keep == 'sum' then redis.call('HINCRBY', statement, 'p:score', ARGV[b + 11]) end
      expire_once(statement, period(i, 4))
    end
  end

  if PLAYERS then
    if not seated then
      redis.call('SADD', PLAYERS, member)
      expire_once(PLAYERS, period(1, 4))
    end
    if max_entries > 0 then
      entries_now = redis.call('HINCRBY', ENTRIES, member, 1)
      expire_once(ENTRIES, period(1, 4))
    end
  end

  local receipt = ((keep == 'best' and not changed) and SCORE_NOT_BETTER or SCORE_KEPT) .. flags
  redis.call('HSET', bucket, field, fingerprint .. receipt)
  redis.call('EXPIRE', bucket, ARGV[2], 'NX')
  if creates then marker_created(GUARD, bucket, marks, mark_day, mark_shard) end
  rate_record(rate_log, rate_max, rate_window, now_ms, field)
  local joined = false
  local league_composite = league > 0 and redis.call('ZSCORE', KEYS[index(league, 0)], member)
  if league_composite and not cohort then
    joined, cohort = league_place(KEYS[tonumber(ARGV[at])], KEYS[tonumber(ARGV[at + 1])], KEYS[tonumber(ARGV[at + 2])],
      KEYS[tonumber(ARGV[at + 3])], KEYS[tonumber(ARGV[at + 4])], KEYS[tonumber(ARGV[at + 5])],
      KEYS[tonumber(ARGV[at + 6])], KEYS[tonumber(ARGV[at + 7])], member, tonumber(ARGV[at + 9]),
      tonumber(ARGV[at + 10]), period(league, 4), now_ms)
  end
  -- The cohort's order (prelude_league.lua `order_sync`), or `record_cohort` below keeps it.
  local cohort_recorded = notice ~= '' and cohort and kept[league] and index(league, 6) > 0
  if cohort and not cohort_recorded and (kept[league] or joined) then
    order_sync(KEYS[tonumber(ARGV[at + 8])], cohort, member, olds[league], league_composite, order_held, joined)
  end
  if notice ~= '' then
    local moves = {}
    for i = 1, n do
      if kept[i] and index(i, 6) > 0 then
        record_move(moves, 'T', KEYS[index(i, 0)], period(i, 2), period(i, 3), index(i, 6), member, olds[i] > 0 and olds[i],
          KEYS[index(i, 7)])
      end
    end
    if cohort_recorded then
      record_cohort(moves, 'L', KEYS[index(league, 0)], KEYS[tonumber(ARGV[at])], KEYS[tonumber(ARGV[at + 1])],
        KEYS[tonumber(ARGV[at + 8])], period(league, 2), period(league, 3), member, olds[league], joined, cohort, order_held)
    end
    record_moves(NOTICES, notice, moves)
  end
  journal(JOURNAL, ARGV[b + 13], receipt)
  return 'new', receipt, standing()
end

local reply, b = {}, 18
for _ = 1, tonumber(ARGV[1]) do
  local status, detail, composites, ranks = submit(b)
  reply[#reply + 1] = status
  reply[#reply + 1] = detail
  local n = tonumber(ARGV[b + 12])
  for i = 1, n do
    reply[#reply + 1] = composites and composites[i] or ''
    reply[#reply + 1] = ranks and ranks[i] or 0
  end
  if PLAYERS then
    if not entries_now and max_entries > 0 then entries_now = redis.call('HGET', ENTRIES, ARGV[b + 8]) end
    reply[#reply + 1] = entries_now or 0
    entries_now = nil
  end
  b = b + 16 + 8 * n + (tonumber(ARGV[b + 14]) > 0 and 11 or 0)
end
return reply
