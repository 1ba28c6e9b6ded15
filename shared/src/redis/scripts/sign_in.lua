#!lua
--[[
sign_in.lua: sign users in, each for one day, exactly once, in one round trip: the day's
bit, the consecutive-day streak, and the sign-in points plus any streak bonus on the board.
A single sign-in is a chunk of one; a queue's batch sends one call per chunk. Sign-ins are
applied in order, each seeing what the ones before it wrote (the same id twice is a
duplicate).

Bitmap layout (one key per user per month): bit d-1 is day d; the u32 at bit 32 is the streak
that ended on the previous month's last day, written when day 1 is signed. A streak read with
BITFIELD (the seed's method) that reaches day 1 continues with that carry, so streaks are
exact however many months they span while only two months' keys are ever read.

The date policy (today, or yesterday within the grace window) means at most the day after
`date` can already be signed. When it is (a late sign-in for yesterday arriving after today's),
today's streak, which was 1 when today was signed, becomes streak + 1: its bonus, if any, is
awarded now, to today's periods (bonuses never start at 1 day, see config.rs).

ARGV[1]    number of sign-ins in the chunk; then, for each, its number of keys, its number
           of arguments, and its arguments, numbered below from 1; its keys follow the keys
           of the sign-in before it, numbered below from 1 too

KEYS[1]    event marker: string "<fingerprint>\n<reply JSON>", kept ARGV[9] seconds
KEYS[2]    the user's bitmap of the month of `date`
KEYS[3]    the user's bitmap of the previous month
KEYS[4]    the user's bitmap of the month of the day after `date` (KEYS[2] unless `date` is a
           month's last day)
KEYS[5]    the board's guard (hash): "ban|<user>", "closed|<kind>:<id>" (see apply_event.lua)
KEYS[6]    the board's journal (stream, docs/journal.md)
KEYS[7..]  the board's period sorted sets: n for `date`, then n for the day after (a key may
           appear in both halves), scored with the tie-break composite (see tiebreak.rs);
           then, when ARGV[13] is 1, the member's statement of each of those periods, in the
           same order (hash, see apply_event.lua): "s:n" sign-ins, "s:p" their points, "s:b"
           streak bonuses

ARGV[1]    payload fingerprint of the sign-in
ARGV[2]    member (user id)
ARGV[3]    day of month of `date` (1-31)
ARGV[4]    number of days in the previous month
ARGV[5]    day of month of the day after `date`
ARGV[6]    points for signing in
ARGV[7]    streak bonuses, "days:bonus" pairs separated by commas ("" for none)
ARGV[8]    time part of the composite (now)
ARGV[9]    marker TTL in seconds
ARGV[10]   TTL in seconds for the bitmaps
ARGV[11]   refusal of a first delivery: "" (none), "too_late" or "in_future" (a date the
           policy no longer accepts). Checked only after the marker: a retry is a duplicate
           whenever it arrives
ARGV[12]   `date` (YYYY-MM-DD), recorded in the reply so a retry reports the day first signed
ARGV[13]   1 when the board keeps statements, else 0
ARGV[14]   the sign-in's journal entry (JSON, journal.rs), appended with the reply when the
           sign-in is recorded now; "" when the journal is off
ARGV[15]   the function's clock (ms): a period set the guard records, gone before its expiry,
           is a loss: the board is fenced and the sign-in refused, nothing else written
           (prelude.lua `fence_if_lost`); a set the sign-in creates is recorded (`period_add`)
ARGV[16..] for each period sorted set, in KEYS order: period kind, period id, TTL in seconds ("0": none)

Reply: per sign-in, in order, two values: status, body
  {"new", json}          signed now, or already signed that day; json is stored in the marker
  {"duplicate", json}    this event id was seen with this payload; json is the first reply
  {"conflict", ""}       this event id was seen with another payload; nothing written
  {"too_late", ""}       a first delivery for a date no longer accepted (ARGV[11]); nothing
  {"in_future", ""}      written
  {"banned", ""}         the user is banned from this board; nothing written
  {"period_closed", id}  a period the points land in is frozen (archived); nothing written
  {"out_of_range", ""}   a score would leave the composite's range; nothing written
json: {"date":s,"already_signed":bool,"streak":n,"days_this_month":n,"points_awarded":n}
]]

local CARRY = 32   -- bit offset of the streak carried in from the previous month

-- Signs one user in: its keys are KEYS[k + 1..k + kc], its arguments ARGV[a + 1..]. Answers
-- {status, body}.
local function sign_in(k, a, kc)
  effects_begin(ARGV[a + 14] ~= '' and KEYS[k + 6], KEYS[k + 5])
  local seen = replay(KEYS[k + 1], ARGV[a + 1])
  if seen then return seen end
  if ARGV[a + 11] ~= '' then return {ARGV[a + 11], ''} end

  local member = ARGV[a + 2]
  local day, previous_month_days, next_day = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local tie = tonumber(ARGV[a + 8])
  local FIRST_BOARD, PERIOD_ARGS = 7, 16
  local now_ms = tonumber(ARGV[a + 15])
  local statements = ARGV[a + 13] == '1'
  local period_keys = (kc - FIRST_BOARD + 1) / (statements and 2 or 1)
  local per_day = period_keys / 2

  local refusal, closed = guard_refusal_of_args(KEYS[k + 5], member, period_keys, a + PERIOD_ARGS)
  if refusal then return {refusal, closed} end

  -- Consecutive signed days ending on day `through` of the month in `key`, continued into
  -- earlier months by the carry when the run reaches day 1 (0 when `through` is not signed).
  local function streak_through(key, through)
    local got = redis.call('BITFIELD', key, 'GET', 'u' .. through, 0, 'GET', 'u32', CARRY)
    local bits, run = got[1], 0
    while bits % 2 == 1 do
      run = run + 1
      bits = (bits - 1) / 2
    end
    if run == through then run = run + got[2] end
    return run
  end

  local function finish(already_signed, streak, awarded)
    local reply = cjson.encode({
      date = ARGV[a + 12],
      already_signed = already_signed,
      streak = streak,
      -- Bytes 0-3 hold the day bits; the carry starts at byte 4.
      days_this_month = redis.call('BITCOUNT', KEYS[k + 2], 0, 3),
      points_awarded = awarded,
    })
    redis.call('SET', KEYS[k + 1], ARGV[a + 1] .. '\n' .. reply, 'EX', ARGV[a + 9])
    journal(KEYS[k + 6], ARGV[a + 14], reply)
    return {'new', reply}
  end

  if redis.call('GETBIT', KEYS[k + 2], day - 1) == 1 then
    return finish(true, streak_through(KEYS[k + 2], day), 0)
  end

  local before
  if day == 1 then
    before = streak_through(KEYS[k + 3], previous_month_days)
  else
    before = streak_through(KEYS[k + 2], day - 1)
  end
  local streak = before + 1

  local bonuses = {}
  for days, bonus in string.gmatch(ARGV[a + 7], '(%d+):(%d+)') do
    bonuses[tonumber(days)] = tonumber(bonus)
  end
  local awarded = tonumber(ARGV[a + 6]) + (bonuses[streak] or 0)
  local next_signed = redis.call('GETBIT', KEYS[k + 4], next_day - 1) == 1
  local next_bonus = next_signed and (bonuses[streak + 1] or 0) or 0

  -- Points per distinct period key: the sign-in on `date`'s periods, today's late bonus on
  -- the next day's. Every check happens before the first write.
  local order, add = {}, {}
  local function credit(i, signed, bonus)
    local key = KEYS[k + FIRST_BOARD - 1 + i]
    if not add[key] then
      add[key] = {points = 0, period = i, signed = 0, bonus = 0}
      order[#order + 1] = key
    end
    add[key].points = add[key].points + signed + bonus
    add[key].signed = add[key].signed + signed
    add[key].bonus = add[key].bonus + bonus
  end
  for i = 1, per_day do credit(i, tonumber(ARGV[a + 6]), bonuses[streak] or 0) end
  for i = per_day + 1, period_keys do credit(i, 0, next_bonus) end
  -- Every set checked for a loss before any answer depends on what it holds.
  local held = {}
  for _, key in ipairs(order) do
    held[key] = redis.call('ZSCORE', key, member)
    if not held[key] then
      local p = add[key].period
      fence_if_lost(KEYS[k + 5], key, period_arg(a + PERIOD_ARGS, p, 0), period_arg(a + PERIOD_ARGS, p, 1), now_ms)
    end
  end
  for _, key in ipairs(order) do
    add[key].total = points_of(held[key]) + add[key].points
    if add[key].total > MAX_POINTS then return {'out_of_range', ''} end
  end

  -- Every key written below that no check above has read (prelude.lua `writable`).
  if statements then
    for _, key in ipairs(order) do
      if add[key].points > 0 then
        local statement = KEYS[k + FIRST_BOARD - 1 + period_keys + add[key].period]
        writable(statement, 'hash')
        countable(statement, 's:n', 's:p', 's:b')
      end
    end
  end
  if ARGV[a + 14] ~= '' then writable(KEYS[k + 6], 'stream') end

  redis.call('SETBIT', KEYS[k + 2], day - 1, 1)
  if day == 1 then redis.call('BITFIELD', KEYS[k + 2], 'SET', 'u32', CARRY, before) end
  if next_signed and next_day == 1 then redis.call('BITFIELD', KEYS[k + 4], 'SET', 'u32', CARRY, streak) end
  expire_once(KEYS[k + 2], ARGV[a + 10])
  for _, key in ipairs(order) do
    if add[key].points > 0 then
      local p = add[key].period
      period_add(key, KEYS[k + 5], period_arg(a + PERIOD_ARGS, p, 0), period_arg(a + PERIOD_ARGS, p, 1),
        period_arg(a + PERIOD_ARGS, p, 2), composite_of(add[key].total, tie), member, now_ms)
      if statements then
        local statement = KEYS[k + FIRST_BOARD - 1 + period_keys + p]
        if add[key].signed > 0 then
          redis.call('HINCRBY', statement, 's:n', 1)
          redis.call('HINCRBY', statement, 's:p', add[key].signed)
        end
        if add[key].bonus > 0 then redis.call('HINCRBY', statement, 's:b', add[key].bonus) end
        expire_once(statement, period_arg(a + PERIOD_ARGS, p, 2))
      end
    end
  end
  return finish(false, streak, awarded + next_bonus)
end

local reply, k, at = {}, 0, 2
for _ = 1, tonumber(ARGV[1]) do
  local kc, ac = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  local answer = sign_in(k, at + 1, kc)
  reply[#reply + 1] = answer[1]
  reply[#reply + 1] = answer[2]
  k, at = k + kc, at + 2 + ac
end
return reply
