#!lua
--[[
submit_score.lua: apply one submitted score to a score board, exactly once, in one round
trip: every period keeps the best, the latest or the sum of the user's submissions.
Composed with the constants and prelude.lua's helpers (see `compose` in mod.rs). Scores are
handled as values (the score, or MAX_SCORE - score where lower is better), so in every period
a higher value is better and the sorted set holds value * SCORE_SPAN + time part.

KEYS[1]    the board's guard (hash, see apply_event.lua)
KEYS[2..4] the event-id marker buckets of the board's local day now (written), the day before
           and the day after (read: clock skew); shared with apply_event.lua
KEYS[5]    the user's rate-limit log of score submissions on this board (sorted set)
KEYS[5+i]  the sorted set of period i, i = 1..n; then, when ARGV[13] is 1, the member's
           statement of each period (hash, see apply_event.lua): "n:score" submissions
           applied in that period, "p:score" their sum (on "sum" boards)

ARGV[1]    seconds a marker bucket created now is kept
ARGV[2]    marker field: 8 bytes of the event id's digest
ARGV[3]    payload fingerprint: 4 bytes of the payload's digest
ARGV[4]    member (user id)
ARGV[5]    "best", "latest" or "sum"
ARGV[6]    refusal of a first delivery: "" (none), "too_late" or "in_future" (checked after
           the markers, so a retry is a duplicate whenever it arrives)
ARGV[7]    the submission's value
ARGV[8]    the value of a zero score (where a sum starts)
ARGV[9]    rate limit: submissions allowed in the window ("0": no limit)
ARGV[10]   rate limit window in ms
ARGV[11]   now in ms (the function's clock)
ARGV[12]   n, the number of periods
ARGV[13]   1 when the board keeps statements, else 0
ARGV[14]   the submitted score
then for each period from ARGV[15 + 4 (i - 1)]: kind, id, TTL in seconds ("0": none), time part of
           a score reached now

Reply: {status, detail, composite 1, rank 1, ..., composite n, rank n}; the member's composite
("" when absent) and 1-based rank (0 when absent) in each period, empty for a refusal
  "new", receipt            applied now; standing after it
  "duplicate", i..receipt   seen with this payload (i: the bucket that held it, 0 today, 1 the
                            day before, 2 the day after); the first receipt and standing now
  "conflict", ""            seen with another payload; nothing written
  "too_late"/"in_future", ""  a first delivery outside the event window; nothing written
  "banned", ""              the user is banned from this board; nothing written
  "period_closed", id       a period the submission lands in is frozen; nothing written
  "rate_limited", s         the limit is used up; a slot frees in s seconds; nothing written
  "out_of_range", ""        a sum would leave 0..=MAX_SCORE in every period; nothing written
receipt: SCORE_KEPT or SCORE_NOT_BETTER (a "best" submission no period kept), then one
character per period: "1" when that period's entry changed, "0" when it did not, "o" when a
sum would have left 0..=MAX_SCORE there (that period only is left as it was).
]]

local GUARD, RATE_LOG = KEYS[1], KEYS[5]
local field, fingerprint, member, keep = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local value, zero = tonumber(ARGV[7]), tonumber(ARGV[8])
local n = tonumber(ARGV[12])
local function board(i) return 5 + i end
local function period(i, part) return ARGV[14 + 4 * (i - 1) + part] end

local function with_standing(status, detail)
  local reply = {status, detail}
  for i = 1, n do
    local composite = redis.call('ZSCORE', KEYS[board(i)], member)
    reply[#reply + 1] = composite or ''
    reply[#reply + 1] = composite and redis.call('ZREVRANK', KEYS[board(i)], member) + 1 or 0
  end
  return reply
end

local seen = marker_seen(KEYS[2], KEYS[3], KEYS[4], field, fingerprint)
if seen == 'conflict' then return {'conflict', ''} end
if seen then return with_standing('duplicate', seen) end
if ARGV[6] ~= '' then return {ARGV[6], ''} end
local refusal, closed = guard_refusal(GUARD, member, n, function(i) return period(i, 1) end, function(i) return period(i, 2) end)
if refusal then return {refusal, closed} end
local rate_max, rate_window, now_ms = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local wait = rate_wait(RATE_LOG, rate_max, rate_window, now_ms)
if wait then return {'rate_limited', tostring(wait)} end

-- Every check before the first write: a refused submission leaves no trace. A sum that would
-- leave the range is refused in that period only (flag "o"); in every period, the whole.
local kept, flags, changed, fits = {}, '', false, false
for i = 1, n do
  local held = redis.call('ZSCORE', KEYS[board(i)], member)
  held = held and math.floor(tonumber(held) / SCORE_SPAN)
  local new = value
  if keep == 'best' and held then
    new = math.max(held, value)
  elseif keep == 'sum' then
    new = (held or zero) + value - zero
  end
  if new < 0 or new > MAX_SCORE then
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
if not fits then return {'out_of_range', ''} end

for i = 1, n do
  if kept[i] then
    redis.call('ZADD', KEYS[board(i)], string.format('%.0f', kept[i] * SCORE_SPAN + tonumber(period(i, 4))), member)
    expire_period_once(KEYS[board(i)], GUARD, period(i, 1), period(i, 2), period(i, 3))
  end
end

if ARGV[13] == '1' then
  for i = 1, n do if string.sub(flags, i, i) ~= 'o' then
    local statement = KEYS[5 + n + i]
    redis.call('HINCRBY', statement, 'n:score', 1)
    if keep == 'sum' then redis.call('HINCRBY', statement, 'p:score', ARGV[14]) end
    expire_once(statement, period(i, 3))
  end end
end

local receipt = ((keep == 'best' and not changed) and SCORE_NOT_BETTER or SCORE_KEPT) .. flags
redis.call('HSET', KEYS[2], field, fingerprint .. receipt)
redis.call('EXPIRE', KEYS[2], ARGV[1], 'NX')
rate_record(RATE_LOG, rate_max, rate_window, now_ms, field)
return with_standing('new', receipt)
