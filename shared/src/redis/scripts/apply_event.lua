#!lua
--[[
apply_event.lua: apply a chunk of scored events to one board, each exactly once, in one round
trip. A single event is a chunk of one; a batch sends one call per board per chunk.

The `#!lua` shebang makes Redis 7 refuse the whole script up front when it is out of memory,
instead of failing half-way through its writes. Composed with the constants and prelude.lua's
helpers (see `compose` in mod.rs). Events are applied in order,
each atomically with everything before it: a later event of the chunk sees what an earlier one
wrote (the same id twice is a duplicate).

KEYS[1]    the board's guard (hash): "ban|<user>" for banned users, "closed|<kind>:<id>" for
           periods frozen for archiving; "live|season:<id>" is set when a season's board is
           created, so the archive can tell a lost board from an empty season
KEYS[2..]  every other key the chunk touches, once each; a block names them by index

ARGV[1]    number of events in the chunk
ARGV[2]    seconds a marker bucket created now is kept (to the end of the next local day)
ARGV[3]    index in KEYS of the board's journal (stream, docs/journal.md)
ARGV[4]    index in KEYS of the board's notices (stream, docs/notifications.md); 0: the board
           records no rank moves
ARGV[5..]  one block per event, packed (pack.rs; read with `struct.unpack`, since every
           argument and every tonumber() is a measurable share of a call): big-endian, H an
           index into KEYS (0: none), B a flag, d a number, s a string (Hc0: its length first),
           in this order:
  H  the event-id marker bucket (hash, field -> fingerprint .. receipt) of the board's local
     day now (written)
  H  the bucket of the day before (read)
  H  the bucket of the day after (read only near the end of the day, for a clock ahead of
     ours; 0 otherwise)
  d  the local day of the first (days since 1970-01-01), and
  H  its bucket shard: the bit the guard's record of buckets keeps for it (prelude_markers.lua)
  c8 marker field: 8 bytes of the event id's digest
  c4 payload fingerprint: 4 bytes of the payload's digest
  s  member (user id)
  B  1 for a give, 0 for a take-back
  s  points a give awards (positive integer), as text
  d  the same points
  H  the idempotency ledger (hash, field -> points given): the user's day ledger, the user's
     lifetime ledger or the board's target ledger, by the rule's scope
  s  ledger field: 8 bytes of the digest of "<action>|<target>", "" when the rule records
     nothing
  s  the same entry's field as earlier releases wrote it ("<action>|<target>"): read as the
     same entry (a give already counted, a take-back's points), deleted by a take-back
  H  the user's day ledger (the day's cap counters; may be the ledger above, whose TTL then
     stands for both)
  s  cap counter field, "" when the rule has no daily cap
  d  the daily cap in points
  s  TTL in seconds of the idempotency ledger, set once, "0" for none
  s  TTL in seconds of the day ledger, set once, "0" for none
  s  refusal of a first delivery: "" (none), "too_late" or "in_future". Checked only after
     the markers, so a retry is a duplicate whenever it arrives
  H  the user's rate-limit log of this action (sorted set: marker field -> ms)
  d  rate limit: events allowed in the window (0: no limit)
  d  rate limit window in ms
  d  now in ms (the function's clock)
  d  time part of the composite for "reached now" (tiebreak.rs; earlier: larger)
  B  n, the number of period boards
  s  the action (for statements)
  B  1 when a take-back that finds nothing to take back is to wait for its give (a queue's
     delivery, which may come before the give's): answered "deferred" with nothing written,
     so its redelivery is a first delivery again
  s  the event's journal entry (JSON, journal.rs), appended with the receipt when the event
     is applied now; "" when the journal is off
  B  l, which of the n periods is the board's league period (docs/leagues.md); 0: no league
  s  the event id as notifications name it; "" when the board records no rank moves
then n times: H the period's sorted set (scored points * SPAN + time part), s kind, s id,
  s TTL in seconds ("0": none), H the member's statement of that period (a hash, see below;
  0 when the board keeps no statements), B the top watched for notifications (0: none),
  H its arrivals (a hash, prelude.lua `record_move`; 0 when not watched)
then, when l > 0, the league's keys of that period (keys.rs): H placements, H cohorts,
  H cohort counts, H tiers, H waiting players, H the period before's placements, H its
  waiting players, H its results, H the period's cohorts in order; d cohort size, d the top
  tier. The member's first write that leaves them on the league period's board places them in
  a cohort (prelude_league.lua); every write that moves them keeps their cohort's order

A statement hash counts what made the member's score in one period: "n:<action>" events that
earned points, "p:<action>" points they earned, "w:<action>" points the daily cap withheld,
"t:<action>" points taken back. It expires with its period's board.

Reply: per event, in order, 2 + 2n values: status, detail, then for each period the member's
points and 1-based rank (0: not on the board)
  "new", receipt         applied now (or counted as nothing); standing after this event
  "duplicate", i..receipt  this id was seen with this payload; i: which bucket held it (0:
                         this day's, 1: the day before, 2: the day after); the first
                         delivery's receipt, and the member's standing now
  "conflict", ""         this id was seen with another payload; nothing written
  "too_late"/"in_future", ""  a first delivery outside the event window; nothing written
  "out_of_range", ""     a score would leave the composite's range; nothing written
  "banned", ""           the user is banned from this board; nothing written
  "period_closed", id    a period the event lands in is frozen (archived); nothing written
  "rate_limited", s      the rate limit is used up; a slot frees in s seconds; nothing written
  "deferred", ""         a take-back with nothing to take back, sent to wait for its give;
                         nothing written
receipt: "<code>[<delta>][,<capped>][;<delta of period 1>,...]": code RECEIPT_APPLIED or the
reason nothing was applied; delta the largest change of any period (for an applied event);
capped the points the daily cap withheld; the per-period changes only when one differs from
delta. A give adds its points to every period and the member reached the new score now; a
take-back removes what the ledger says was given, never more than a period still holds, and
keeps the member's reached-at time (they held at least the lower score since then).
]]

-- Written for the interpreter's sake (this script is most of a write's Redis CPU, see
-- BENCHMARKS.md, issue 30): every number the caller knows arrives as a number, strings handed to Redis
-- as they came (a number argument costs a conversion), no closure built per event, and a TTL
-- set only where the write just before it may have created the key (ZADD, HSET and HINCRBY
-- say so).
local GUARD = KEYS[1]
local EVENT = '>HHHdHc8c4Hc0BHc0dHHc0Hc0HHc0dHc0Hc0Hc0HddddBHc0BHc0BHc0'
local JOURNAL = KEYS[tonumber(ARGV[3])]
local NOTICES = KEYS[tonumber(ARGV[4])]
local PERIOD = '>HHc0Hc0Hc0HBH'
local LEAGUE = '>HHHHHHHHHdd'

-- Appends an event's reply: status, detail, then each of its `boards` periods' points and
-- rank (zeros for a refusal).
local function answer(reply, boards, points, ranks, status, detail)
  reply[#reply + 1] = status
  reply[#reply + 1] = detail
  for i = 1, boards do
    reply[#reply + 1] = points[i] or 0
    reply[#reply + 1] = ranks[i] or 0
  end
end

-- Applies the event of `block` and appends its reply.
local function apply(block, reply)
  local today, before, after, mark_day, mark_shard, field, fingerprint, member, give, points_text, points, ledger_index,
    ledger_field, legacy_field, day_index, cap_field, cap, ledger_ttl, day_ttl, refusal,
    rate_index, rate_max, rate_window, now_ms, now_part, boards, action, defer, entry, league, notice, pos =
    struct.unpack(EVENT, block)
  effects_begin(entry ~= '' and JOURNAL, GUARD)
  local board, kind, id, ttl, statement, top, arrivals = {}, {}, {}, {}, {}, {}, {}
  for i = 1, boards do
    board[i], kind[i], id[i], ttl[i], statement[i], top[i], arrivals[i], pos = struct.unpack(PERIOD, block, pos)
  end
  local points_now, ranks = {}, {}

  local bucket = KEYS[today]
  -- KEYS[0] is nil: the day after is not read.
  local seen, gone = marker_seen(bucket, KEYS[before], KEYS[after], field, fingerprint)
  if seen == 'conflict' then return answer(reply, boards, points_now, ranks, 'conflict', '') end
  if seen then
    for i = 1, boards do
      local composite = redis.call('ZSCORE', KEYS[board[i]], member)
      points_now[i] = points_of(composite)
      ranks[i] = composite and redis.call('ZREVRANK', KEYS[board[i]], member) + 1 or 0
    end
    return answer(reply, boards, points_now, ranks, 'duplicate', seen)
  end
  if refusal ~= '' then return answer(reply, boards, points_now, ranks, refusal, '') end

  -- Refusals that depend on the board's state, checked with one read.
  local fields = {GUARD_BAN .. member}
  for i = 1, boards do fields[i + 1] = GUARD_CLOSED .. kind[i] .. ':' .. id[i] end
  fields[boards + 2], fields[boards + 3], fields[boards + 4] = GUARD_BORN, GUARD_FENCE, GUARD_ENDED
  for i = 1, boards do fields[boards + 4 + i] = GUARD_KEPT .. kind[i] .. ':' .. id[i] end
  local guards = redis.call('HMGET', GUARD, unpack(fields))
  refuse_restoring(guards[boards + 2], guards[boards + 3])
  refuse_ended(guards[boards + 4])
  if guards[1] then return answer(reply, boards, points_now, ranks, 'banned', '') end
  for i = 1, boards do
    if guards[i + 1] then return answer(reply, boards, points_now, ranks, 'period_closed', id[i]) end
  end
  -- A marker bucket the guard records and the event's lookup found gone fences the board.
  local creates, marks = markers_check(GUARD, gone, mark_day, mark_shard)

  -- Rate limit: only read here; the event is logged with the other writes, so a refused
  -- event leaves no trace.
  local rate_log = KEYS[rate_index]
  if rate_max > 0 then
    local wait = rate_wait(rate_log, rate_max, rate_window, now_ms)
    if wait then return answer(reply, boards, points_now, ranks, 'rate_limited', tostring(wait)) end
  end

  local ledger = KEYS[ledger_index]
  -- What the ledger holds for this entry: under its digest, or as an earlier release wrote it.
  local given
  if ledger_field ~= '' then
    local held = redis.call('HMGET', ledger, ledger_field, legacy_field)
    given = held[1] or held[2]
  end
  -- `delta_text`: delta as the block spelled it, while it is still the rule's points.
  local delta, delta_text, capped, code = 0, nil, 0, RECEIPT_APPLIED
  if give == 1 then
    if given then
      code = RECEIPT_ALREADY_COUNTED
    else
      delta, delta_text = points, points_text
      if cap_field ~= '' then
        local room = math.max(cap - tonumber(redis.call('HGET', KEYS[day_index], cap_field) or '0'), 0)
        if room < delta then
          capped = delta - room
          delta, delta_text = room, nil
          if delta == 0 then code = RECEIPT_DAILY_CAP end
        end
      end
    end
  elseif given then
    delta = -tonumber(given)
  elseif defer == 1 then
    return answer(reply, boards, points_now, ranks, 'deferred', '')
  else
    code = RECEIPT_NOTHING_TO_TAKE_BACK
  end

  -- Every check happens before the first write: a refused event leaves no trace, and a key
  -- of another type fails the event with nothing written.
  -- `written`: each period's composite as this event writes it (nil: left as it was, or none).
  -- `fresh`: the period's set is to be recorded in the guard when this event writes it.
  local composites, changes, written, fresh = {}, {}, {}, {}
  local largest, differ = 0, false
  for i = 1, boards do
    local held = redis.call('ZSCORE', KEYS[board[i]], member)
    if held then
      fresh[i] = effects and not guards[boards + 4 + i]
    else
      local state = period_state(KEYS[board[i]], guards[boards + 4 + i], now_ms)
      if state == 'lost' then fence_lost(GUARD) end
      fresh[i] = state == 'new'
    end
    composites[i] = tonumber(held or '0')
    local held = points_of(composites[i])
    if held + delta > MAX_POINTS then return answer(reply, boards, {}, ranks, 'out_of_range', '') end
    -- Never below zero: a take-back cannot remove more than the period still holds.
    points_now[i] = math.max(held + delta, 0)
    changes[i] = points_now[i] - held
    if math.abs(changes[i]) > math.abs(largest) then largest = changes[i] end
  end

  -- Every key written below that no check above has read (prelude.lua `writable`).
  if cap_field ~= '' and delta ~= 0 then writable(KEYS[day_index], 'hash') end
  for i = 1, boards do
    if statement[i] > 0 and (changes[i] ~= 0 or capped > 0) then
      writable(KEYS[statement[i]], 'hash')
      countable(KEYS[statement[i]], 'n:' .. action, 'p:' .. action, 't:' .. action, 'w:' .. action)
    end
    -- A watched period's arrivals (prelude.lua `record_move`): HMGET fails a key of another type.
    if notice ~= '' and top[i] > 0 and changes[i] ~= 0 then countable(KEYS[arrivals[i]], '#') end
  end
  -- A placed member's write touches no league key but their cohort's order, whose mark is read
  -- here (a key of another type fails the call unwritten); a first write may place them.
  local cohort, order_held
  if league > 0 and (points_now[league] > 0 or changes[league] ~= 0) then
    local members, cohorts, counts, tiers, pending, prev_members, prev_pending, prev_results, order =
      struct.unpack('>HHHHHHHHH', block, pos)
    cohort = redis.call('HGET', KEYS[members], member)
    if cohort then
      order_held = redis.call('ZSCORE', KEYS[order], cohort .. '#')
    elseif points_now[league] > 0 then
      writable(KEYS[members], 'hash')
      writable(KEYS[cohorts], 'zset')
      writable(KEYS[counts], 'hash')
      writable(KEYS[tiers], 'hash')
      writable(KEYS[pending], 'zset')
      writable(KEYS[prev_members], 'hash')
      writable(KEYS[prev_pending], 'zset')
      writable(KEYS[prev_results], 'hash')
      writable(KEYS[order], 'zset')
    end
  end
  if notice ~= '' then writable(NOTICES, 'stream') end
  if entry ~= '' then writable(JOURNAL, 'stream') end

  if delta ~= 0 then
    delta_text = delta_text or tostring(delta)
    -- Whether the ledger's TTL was just seen to: it may be the day ledger too.
    local ledger_kept = false
    if give == 1 then
      if ledger_field ~= '' and redis.call('HSET', ledger, ledger_field, delta_text) == 1 then
        expire_once(ledger, ledger_ttl)
        ledger_kept = true
      end
    else
      redis.call('HDEL', ledger, ledger_field, legacy_field)
    end
    if cap_field ~= '' and redis.call('HINCRBY', KEYS[day_index], cap_field, delta_text) == delta
      and not (ledger_kept and day_index == ledger_index) then
      expire_once(KEYS[day_index], day_ttl)
    end
    for i = 1, boards do
      local key = KEYS[board[i]]
      if points_now[i] > 0 and changes[i] ~= 0 then
        -- A give is reached when it happened, never before the total it adds to was (a queue
        -- message older than one applied before it); a take-back keeps the time the member got
        -- there. Later is the smaller time part.
        local time_part = composites[i] % SPAN
        if give == 1 then time_part = composites[i] > 0 and math.min(now_part, time_part) or now_part end
        written[i] = composite_of(points_now[i], time_part)
        -- A member already there means the board existed, with its TTL.
        if redis.call('ZADD', key, written[i], member) == 1 then
          expire_period_once(key, GUARD, kind[i], id[i], ttl[i])
        end
        if fresh[i] then period_kept(GUARD, kind[i], id[i], ttl[i], now_ms) end
      elseif points_now[i] == 0 then
        remove_member(key, GUARD, kind[i], id[i], member)
      end
    end
  end

  for i = 1, boards do
    if statement[i] > 0 and (changes[i] ~= 0 or capped > 0) then
      local key, first = KEYS[statement[i]], false
      if changes[i] > 0 then
        first = redis.call('HINCRBY', key, 'n:' .. action, 1) == 1
        redis.call('HINCRBY', key, 'p:' .. action, changes[i])
      elseif changes[i] < 0 then
        first = redis.call('HINCRBY', key, 't:' .. action, -changes[i]) == -changes[i]
      end
      if capped > 0 and redis.call('HINCRBY', key, 'w:' .. action, capped) == capped then first = true end
      -- A field just created may have created the statement.
      if first then expire_once(key, ttl[i]) end
    end
  end

  for i = 1, boards do
    ranks[i] = points_now[i] > 0 and redis.call('ZREVRANK', KEYS[board[i]], member) + 1 or 0
    if changes[i] ~= largest then differ = true end
  end

  local joined = false
  if league > 0 and points_now[league] > 0 and not cohort then
    local members, cohorts, counts, tiers, pending, prev_members, prev_pending, prev_results, _, size, top_tier =
      struct.unpack(LEAGUE, block, pos)
    joined, cohort = league_place(KEYS[members], KEYS[cohorts], KEYS[counts], KEYS[tiers], KEYS[pending], KEYS[prev_members],
      KEYS[prev_pending], KEYS[prev_results], member, size, top_tier, ttl[league], now_ms)
  end
  -- The cohort's order (prelude_league.lua `order_sync`), or `record_cohort` below keeps it.
  local cohort_recorded = notice ~= '' and cohort and top[league] > 0 and changes[league] ~= 0
  if cohort and not cohort_recorded and (changes[league] ~= 0 or joined) then
    order_sync(KEYS[struct.unpack('>H', block, pos + 16)], cohort, member, composites[league],
      points_now[league] > 0 and (written[league] or composites[league]), order_held, joined)
  end

  if notice ~= '' then
    local moves = {}
    for i = 1, boards do
      if top[i] > 0 and changes[i] ~= 0 then
        record_move(moves, 'T', KEYS[board[i]], kind[i], id[i], top[i], member, composites[i] > 0 and composites[i],
          KEYS[arrivals[i]])
      end
    end
    if cohort_recorded then
      local members, cohorts = struct.unpack('>HH', block, pos)
      local order = struct.unpack('>H', block, pos + 16)
      record_cohort(moves, 'L', KEYS[board[league]], KEYS[members], KEYS[cohorts], KEYS[order], kind[league], id[league],
        member, composites[league], joined, cohort, order_held, written[league] or false)
    end
    record_moves(NOTICES, notice, moves)
  end

  local receipt = code
  if delta ~= 0 then receipt = receipt .. (largest == delta and delta_text or largest) end
  if capped > 0 then receipt = receipt .. ',' .. capped end
  if differ then receipt = receipt .. ';' .. table.concat(changes, ',') end
  redis.call('HSET', bucket, field, fingerprint .. receipt)
  redis.call('EXPIRE', bucket, ARGV[2], 'NX')
  if creates then marker_created(GUARD, bucket, marks, mark_day, mark_shard) end
  if rate_max > 0 then rate_record(rate_log, rate_max, rate_window, now_ms, field) end
  journal(JOURNAL, entry, receipt)
  return answer(reply, boards, points_now, ranks, 'new', receipt)
end

local reply = {}
for k = 1, tonumber(ARGV[1]) do apply(ARGV[4 + k], reply) end
return reply
