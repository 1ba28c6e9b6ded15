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
KEYS[2..]  every other key the chunk touches, once each; ARGV names them by index

ARGV[1]    number of events in the chunk
ARGV[2]    seconds a marker bucket created now is kept (to the end of the next local day)
then one block per event, from ARGV[b] (b = 3 for the first):
b+0..2     indexes of the event-id marker buckets (hashes, field -> fingerprint .. receipt)
           of the board's local day now (written), the day before and the day after (read:
           clock skew)
b+3        marker field: 8 bytes of the event id's digest
b+4        payload fingerprint: 4 bytes of the payload's digest
b+5        member (user id)
b+6        "give" or "take"
b+7        points a give awards (positive integer)
b+8        index of the idempotency ledger (hash, field -> points given): the user's day
           ledger, the user's lifetime ledger or the board's target ledger, by the rule's scope
b+9        ledger field: 8 bytes of the digest of "<action>|<target>", "" when the rule
           records nothing
b+10       the same entry's field as earlier releases wrote it ("<action>|<target>"): read as
           the same entry (a give already counted, a take-back's points), deleted by a take-back
b+11       index of the user's day ledger (the day's cap counters; may equal b+8's)
b+12       cap counter field, "" when the rule has no daily cap
b+13       the daily cap in points
b+14       TTL in seconds of the idempotency ledger, set once, "0" for none
b+15       TTL in seconds of the day ledger, set once, "0" for none
b+16       refusal of a first delivery: "" (none), "too_late" or "in_future". Checked only
           after the markers, so a retry is a duplicate whenever it arrives
b+17       index of the user's rate-limit log of this action (sorted set: marker field -> ms)
b+18       rate limit: events allowed in the window ("0": no limit)
b+19       rate limit window in ms
b+20       now in ms (the function's clock)
b+21       time part of the composite for "reached now" (tiebreak.rs; earlier: larger)
b+22       n, the number of period boards
b+23       the action (for statements)
then n quintuples from b+24: index of the period's sorted set (scored points * SPAN + time
           part), kind, id, TTL in seconds ("0": none), index of the member's statement of that
           period (a hash, see below; "0" when the board keeps no statements)

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
receipt: "<code>[<delta>][,<capped>][;<delta of period 1>,...]": code RECEIPT_APPLIED or the
reason nothing was applied; delta the largest change of any period (for an applied event);
capped the points the daily cap withheld; the per-period changes only when one differs from
delta. A give adds its points to every period and the member reached the new score now; a
take-back removes what the ledger says was given, never more than a period still holds, and
keeps the member's reached-at time (they held at least the lower score since then).
]]

local GUARD = KEYS[1]

-- One event's block, from ARGV[b]: its status, detail, and the periods' points and ranks
-- (nil for a refusal).
local function apply(b)
  local field, fingerprint, member = ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
  local boards = tonumber(ARGV[b + 22])
  local function board(i) return tonumber(ARGV[b + 19 + 5 * i]) end
  local function period(i, part) return ARGV[b + 19 + 5 * i + part] end

  local function standing_now()
    local points, ranks = {}, {}
    for i = 1, boards do
      local composite = redis.call('ZSCORE', KEYS[board(i)], member)
      points[i] = points_of(composite)
      ranks[i] = composite and redis.call('ZREVRANK', KEYS[board(i)], member) + 1 or 0
    end
    return points, ranks
  end

  local bucket = KEYS[tonumber(ARGV[b])]
  local seen = marker_seen(bucket, KEYS[tonumber(ARGV[b + 1])], KEYS[tonumber(ARGV[b + 2])], field, fingerprint)
  if seen == 'conflict' then return 'conflict', '' end
  if seen then
    local points, ranks = standing_now()
    return 'duplicate', seen, points, ranks
  end
  if ARGV[b + 16] ~= '' then return ARGV[b + 16], '' end

  -- Refusals that depend on the board's state, checked with one read.
  local refusal, closed = guard_refusal(GUARD, member, boards,
    function(i) return period(i, 1) end, function(i) return period(i, 2) end)
  if refusal then return refusal, closed end

  -- Rate limit: only read here; the event is logged with the other writes, so a refused
  -- event leaves no trace.
  local rate_log = KEYS[tonumber(ARGV[b + 17])]
  local rate_max, rate_window, now_ms = tonumber(ARGV[b + 18]), tonumber(ARGV[b + 19]), tonumber(ARGV[b + 20])
  local wait = rate_wait(rate_log, rate_max, rate_window, now_ms)
  if wait then return 'rate_limited', tostring(wait) end

  local ledger, ledger_field, legacy_field = KEYS[tonumber(ARGV[b + 8])], ARGV[b + 9], ARGV[b + 10]
  local day_ledger, cap_field = KEYS[tonumber(ARGV[b + 11])], ARGV[b + 12]
  local give = ARGV[b + 6] == 'give'
  -- What the ledger holds for this entry: under its digest, or as an earlier release wrote it.
  local held = ledger_field ~= '' and redis.call('HMGET', ledger, ledger_field, legacy_field)
  local given = held and (held[1] or held[2])
  local delta, capped, code = 0, 0, RECEIPT_APPLIED
  if give then
    if given then
      code = RECEIPT_ALREADY_COUNTED
    else
      delta = tonumber(ARGV[b + 7])
      if cap_field ~= '' then
        local room = math.max(tonumber(ARGV[b + 13]) - tonumber(redis.call('HGET', day_ledger, cap_field) or '0'), 0)
        if room < delta then
          capped = delta - room
          delta = room
          if delta == 0 then code = RECEIPT_DAILY_CAP end
        end
      end
    end
  elseif given then
    delta = -tonumber(given)
  else
    code = RECEIPT_NOTHING_TO_TAKE_BACK
  end

  -- Every check happens before the first write: a refused event leaves no trace.
  local composites, points, changes = {}, {}, {}
  local largest = 0
  for i = 1, boards do
    composites[i] = tonumber(redis.call('ZSCORE', KEYS[board(i)], member) or '0')
    local held = points_of(composites[i])
    if held + delta > MAX_POINTS then return 'out_of_range', '' end
    -- Never below zero: a take-back cannot remove more than the period still holds.
    points[i] = math.max(held + delta, 0)
    changes[i] = points[i] - held
    if math.abs(changes[i]) > math.abs(largest) then largest = changes[i] end
  end

  if delta ~= 0 then
    if give then
      if ledger_field ~= '' then redis.call('HSET', ledger, ledger_field, delta) end
    else
      redis.call('HDEL', ledger, ledger_field, legacy_field)
    end
    if cap_field ~= '' then redis.call('HINCRBY', day_ledger, cap_field, delta) end
    expire_once(ledger, ARGV[b + 14])
    expire_once(day_ledger, ARGV[b + 15])
    for i = 1, boards do
      local key = KEYS[board(i)]
      if points[i] > 0 and changes[i] ~= 0 then
        -- A give is reached now; a take-back keeps the time the member got there.
        local time_part = give and tonumber(ARGV[b + 21]) or composites[i] % SPAN
        redis.call('ZADD', key, composite_of(points[i], time_part), member)
        expire_period_once(key, GUARD, period(i, 1), period(i, 2), period(i, 3))
      elseif points[i] == 0 then
        remove_member(key, GUARD, period(i, 1), period(i, 2), member)
      end
    end
  end

  local action = ARGV[b + 23]
  for i = 1, boards do
    local statement = tonumber(period(i, 4))
    if statement > 0 and (changes[i] ~= 0 or capped > 0) then
      if changes[i] > 0 then
        redis.call('HINCRBY', KEYS[statement], 'n:' .. action, 1)
        redis.call('HINCRBY', KEYS[statement], 'p:' .. action, changes[i])
      elseif changes[i] < 0 then
        redis.call('HINCRBY', KEYS[statement], 't:' .. action, -changes[i])
      end
      if capped > 0 then redis.call('HINCRBY', KEYS[statement], 'w:' .. action, capped) end
      expire_once(KEYS[statement], period(i, 3))
    end
  end

  local ranks = {}
  for i = 1, boards do
    ranks[i] = points[i] > 0 and redis.call('ZREVRANK', KEYS[board(i)], member) + 1 or 0
  end

  local receipt = code
  if delta ~= 0 then receipt = receipt .. largest end
  if capped > 0 then receipt = receipt .. ',' .. capped end
  for i = 1, boards do
    if changes[i] ~= largest then
      receipt = receipt .. ';' .. table.concat(changes, ',')
      break
    end
  end
  redis.call('HSET', bucket, field, fingerprint .. receipt)
  redis.call('EXPIRE', bucket, ARGV[2], 'NX')
  rate_record(rate_log, rate_max, rate_window, now_ms, field)
  return 'new', receipt, points, ranks
end

local reply, b = {}, 3
for _ = 1, tonumber(ARGV[1]) do
  local status, detail, points, ranks = apply(b)
  reply[#reply + 1] = status
  reply[#reply + 1] = detail
  local boards = tonumber(ARGV[b + 22])
  for i = 1, boards do
    reply[#reply + 1] = points and points[i] or 0
    reply[#reply + 1] = ranks and ranks[i] or 0
  end
  b = b + 24 + 5 * boards
end
return reply
