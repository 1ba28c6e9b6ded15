--[[
prelude.lua: the helpers every script is composed with (see `compose` in mod.rs): Redis runs
one script text, made of the script's own shebang line, the constants generated from their
Rust definitions (SPAN, MAX_POINTS, SCORE_SPAN, MAX_SCORE, GUARD_*, RECEIPT_*),
prelude_effects.lua (the recording of a journaled write's effects, `effects` and `journal`), this
file, prelude_league.lua, then the script's body (prelude_read.lua, the reads' fence, comes
first; the shard reads are composed with it alone: `read_script!`).
It defines only local functions and touches no key by itself; it has no shebang, the
script's own comes first.
]]

-- Time parts per point of the board at hand: SPAN on rule boards; the read scripts set it
-- from their ARGV[1], since a score board's composites use SCORE_SPAN (scores.rs).
local span = SPAN

-- Whole points (a score board's values) of a member's composite (nil or false: absent).
local function points_of(composite)
  return composite and math.floor(tonumber(composite) / span) or 0
end

-- The composite score of `points` reached at `time_part`, as ZADD takes it.
local function composite_of(points, time_part)
  return string.format('%.0f', points * span + time_part)
end

-- The answer for an id already seen, from its string marker "<fingerprint>\n<first answer>":
-- {'duplicate', answer} for the same payload, {'conflict', ''} for another; nil when unseen.
local function replay(marker_key, fingerprint)
  local marker = redis.call('GET', marker_key)
  if not marker then return nil end
  local sep = string.find(marker, '\n', 1, true)
  if string.sub(marker, 1, sep - 1) == fingerprint then
    return {'duplicate', string.sub(marker, sep + 1)}
  end
  return {'conflict', ''}
end

-- Periods are passed as ARGV triples (kind, id, TTL) starting at ARGV[first]: field
-- 0, 1 or 2 of the i-th one.
local function period_arg(first, i, field)
  return ARGV[first + 3 * (i - 1) + field]
end

-- A journaled write (`effects_begin` ran) is refused with nothing written while the board is
-- restored (GUARD_FENCE), or when its guard does not say the board's history is all in Redis
-- (no GUARD_BORN: the board was lost and its journal not restored yet): the error's code,
-- BOARD_RESTORING, is answered 503 board_restoring (docs/journal.md#fence). `born` and `fence`
-- are those fields of the guard.
local function refuse_restoring(born, fence)
  -- A move between layouts fences writes for its last step only (docs/scaling.md#changing-shards):
  -- answered 503 board_resharding, for a retry a second later.
  if effects and fence == GUARD_MOVING and born then
    error({err = 'BOARD_RESHARDING the board is taking its last step to another layout'})
  end
  if effects and (fence or not born) then
    error({err = 'BOARD_RESTORING the board is being restored from its journal'})
  end
end

-- A runtime board being deleted (GUARD_ENDED, docs/runtime-boards.md#deleting) takes no more
-- points, journaled or not: the error's code, BOARD_ENDED, is answered 409 board_ended.
local function refuse_ended(ended)
  if ended then
    error({err = 'BOARD_ENDED the board has ended: it takes no more writes'})
  end
end

-- Losses that leave the guard (docs/journal.md#losses): a journaled write that creates a
-- period's sorted set records it in the guard (GUARD_KEPT .. '<kind>:<id>', its absolute
-- expiry in ms on the functions' clock, -1: none), and one that empties it removes the record. A set the guard
-- records that is missing before its expiry was lost (a bad DEL, an eviction): the write or
-- read that finds it refuses, and a write fences the board at once, so nothing is decided
-- against missing history. The state of `key`, whose member was not found, given its record
-- `expiry` (false: none) at `now_ms`: 'lost', 'new' (a write that creates it records it),
-- or nil (exists, or the board is not journaled).
local function period_state(key, expiry, now_ms)
  if not effects then return nil end
  if not expiry then return 'new' end
  if raw_redis.call('EXISTS', key) == 1 then return nil end
  expiry = tonumber(expiry)
  return (expiry < 0 or now_ms < expiry) and 'lost' or 'new'
end

-- Fences the board whose data a write found lost, and refuses the write: the fence is the
-- only thing written (Redis keeps a script's writes before its error); a restore lifts it.
local function fence_lost(guard_key)
  raw_redis.call('HSET', guard_key, GUARD_FENCE, 1, GUARD_LOST, 1)
  error({err = 'BOARD_RESTORING the board lost data its history says it holds: it is restored from its journal'})
end

-- A write that finds no `member` in period `kind`:`id`'s set `key`: fences the board (and
-- refuses) when the guard records that set and it is gone (`period_state`).
local function fence_if_lost(guard_key, key, kind, id, now_ms)
  local recorded = redis.call('HGET', guard_key, GUARD_KEPT .. kind .. ':' .. id)
  if recorded and period_state(key, recorded, now_ms) == 'lost' then fence_lost(guard_key) end
end

-- Records in the guard that the period set `kind`:`id` exists until `ttl` seconds ('0':
-- none) after `now_ms`, on the function's clock, as its TTL was set (`period_state`).
local function period_kept(guard_key, kind, id, ttl, now_ms)
  local expiry = ttl == '0' and '-1' or string.format('%.0f', now_ms + tonumber(ttl) * 1000)
  redis.call('HSET', guard_key, GUARD_KEPT .. kind .. ':' .. id, expiry)
end

local function fence_check(guard_key)
  local fields = redis.call('HMGET', guard_key, GUARD_BORN, GUARD_FENCE)
  refuse_restoring(fields[1], fields[2])
end

-- The board guard's refusal of a write for `member` to the periods kind_of(i):id_of(i),
-- i = 1..n: 'banned', '' or 'period_closed', <id>; nil when the write may go ahead.
local function guard_refusal(guard_key, member, n, kind_of, id_of)
  local fields = {GUARD_BAN .. member}
  for i = 1, n do fields[i + 1] = GUARD_CLOSED .. kind_of(i) .. ':' .. id_of(i) end
  fields[n + 2], fields[n + 3], fields[n + 4] = GUARD_BORN, GUARD_FENCE, GUARD_ENDED
  local guards = redis.call('HMGET', guard_key, unpack(fields))
  refuse_restoring(guards[n + 2], guards[n + 3])
  refuse_ended(guards[n + 4])
  if guards[1] then return 'banned', '' end
  for i = 1, n do
    if guards[i + 1] then return 'period_closed', id_of(i) end
  end
  return nil
end

-- `guard_refusal` for periods passed as ARGV triples from ARGV[first].
local function guard_refusal_of_args(guard_key, member, n, first)
  return guard_refusal(guard_key, member, n,
    function(i) return period_arg(first, i, 0) end, function(i) return period_arg(first, i, 1) end)
end

-- Redis keeps whatever a script wrote before an error. A write script calls this before its
-- first write for every key it writes, or reads after that write, that nothing before it has
-- read: a key holding another type (a programming error, answered 500) then fails the call
-- with nothing written, instead of leaving points without their marker and journal entry.
local function writable(key, kind)
  local held = redis.call('TYPE', key).ok
  if held ~= 'none' and held ~= kind then
    error({err = 'WRONGTYPE ' .. key .. ' holds a ' .. held .. ' where a ' .. kind .. ' is written'})
  end
end

-- `HINCRBY` fails on a field that holds no integer, after whatever the script wrote before it.
-- A write script calls this before its first write with every hash field it will count: a
-- field holding something else (a programming error, or a hand edit; answered 500) then fails
-- the call with nothing written.
local function countable(key, ...)
  local held = redis.call('HMGET', key, ...)
  for i = 1, select('#', ...) do
    if held[i] and not string.find(held[i], '^%-?%d+$') then
      error({err = 'WRONGTYPE ' .. key .. ' field ' .. select(i, ...) .. ' holds no integer where one is counted'})
    end
  end
end

-- TTLs are set once, on a key that exists without one, and never refreshed ('0': none). They
-- come as seconds from the caller's clock (period.rs `ttl_secs`), not as absolute times.
local function expire_once(key, ttl)
  return ttl ~= '0' and redis.call('EXPIRE', key, ttl, 'NX') == 1
end

-- `expire_once` for a period's board. A season board getting its TTL has just been created:
-- the guard remembers that the season had members (GUARD_LIVE), so the archive can tell a
-- lost board from an empty season.
local function expire_period_once(key, guard_key, kind, id, ttl)
  if expire_once(key, ttl) and kind == 'season' then
    redis.call('HSET', guard_key, GUARD_LIVE .. kind .. ':' .. id, 1)
  end
end

-- Adds `member` at `composite` to period `kind`:`id`'s set `key`, which gets its TTL once; a
-- journaled write that creates the set records it in the guard (`period_state`), so its loss
-- is seen by the next write or read while the guard survives.
local function period_add(key, guard_key, kind, id, ttl, composite, member, now_ms)
  local fresh = effects and redis.call('EXISTS', key) == 0
  redis.call('ZADD', key, composite, member)
  expire_period_once(key, guard_key, kind, id, ttl)
  if fresh then period_kept(guard_key, kind, id, ttl, now_ms) end
end

-- Removes `member` from the board of period `kind:id`. A season board this empties was
-- emptied on purpose (a take-back, a correction, a ban): the guard says so, so the archive
-- archives the season as empty instead of refusing it as lost.
local function remove_member(key, guard_key, kind, id, member)
  local removed = redis.call('ZREM', key, member)
  if removed == 1 and redis.call('EXISTS', key) == 0 then
    -- Emptied, not lost (`period_state`).
    if effects then redis.call('HDEL', guard_key, GUARD_KEPT .. kind .. ':' .. id) end
    if kind == 'season' then
      redis.call('HDEL', guard_key, GUARD_LIVE .. kind .. ':' .. id)
      redis.call('HSET', guard_key, GUARD_EMPTIED .. kind .. ':' .. id, 1)
    end
  end
  return removed
end

-- Rate limits are sliding windows: a user's log of recent writes (sorted set: marker field
-- -> ms). Seconds until the log at `now_ms` takes another entry when it already holds `max`
-- in the window (now - window, now]; nil when it may (max 0: no limit). Only reads.
local function rate_wait(log, max, window, now_ms)
  if max == 0 then return nil end
  local window_start = '(' .. string.format('%.0f', now_ms - window)
  local recent = redis.call('ZCOUNT', log, window_start, '+inf')
  if recent < max then return nil end
  -- The slot frees when the entry that put the log at its limit leaves the window.
  local oldest = redis.call('ZRANGEBYSCORE', log, window_start, '+inf', 'WITHSCORES', 'LIMIT', recent - max, 1)
  return math.max(math.ceil((tonumber(oldest[2]) + window - now_ms) / 1000), 1)
end

-- Logs a write allowed by `rate_wait`. The log outlives its newest entry by one window:
-- refreshed on purpose (it is a window).
local function rate_record(log, max, window, now_ms, entry)
  if max == 0 then return end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%.0f', now_ms - window))
  redis.call('ZADD', log, string.format('%.0f', now_ms), entry)
  redis.call('PEXPIRE', log, window)
end


-- Rank-change notifications (docs/notifications.md). The scripts record each applied write's
-- moves on the boards that notify; the drain names the crossings (domain/notify). A move on a
-- period board: "<tag> <kind> <id> <top> <member> <before> <after> <lo> <names…>", places
-- 0-based (-1: not on the board) in notification order (below), `names` the members at places
-- lo.. after the move that it shifted inside the top, and the one it pushed out: at most
-- top + 1, read only when the member moved into, out of or inside the top. `tag`: 'T', or 'BT'
-- for a ban.
--
-- Notification order: best composite first and, inside a tie (the same points reached in the
-- same second), who reached it first, which Redis's order of equal scores (by member) does not
-- keep. Ties are not passes: a climber reaching a composite others hold is placed below them,
-- and the one who reached it first keeps its place until someone truly passes it. A write that
-- ends on a composite others hold records its arrival in the period's arrivals (hash: member
-- -> "<composite>|<n>", "#" the last n; the period's expiry); a member with no record of its
-- composite got there before every recorded one (several such: in Redis's order). A member
-- leaving a tie of more than TIE_SCAN members is taken as its first, and the names of a tie that
-- large are taken in Redis's order.
local TIE_SCAN = 1000

-- The arrival at `composite` (a number) that `record` (a member's arrivals field) states: 0
-- without one of that composite.
local function arrival(record, composite)
  local held, n = string.match(record or '', '^(.-)|(%d+)$')
  if held and tonumber(held) == composite then return tonumber(n) end
  return 0
end

-- Whether `x`, arrived `nx`, comes before `y`, arrived `ny`, in their tie.
local function tie_ahead(x, nx, y, ny)
  if nx ~= ny then return nx < ny end
  return x > y
end

-- The names of `list` (member, composite, … as ZREVRANGE WITHSCORES gives them) in
-- notification order.
local function notice_order(arrivals, list)
  local names, held, n = {}, {}, {}
  for i = 1, #list, 2 do
    names[#names + 1] = list[i]
    held[list[i]] = tonumber(list[i + 1])
  end
  if arrivals and #names > 1 then
    local records = redis.call('HMGET', arrivals, unpack(names))
    for i = 1, #names do n[names[i]] = arrival(records[i], held[names[i]]) end
    table.sort(names, function(x, y)
      if held[x] ~= held[y] then return held[x] > held[y] end
      return tie_ahead(x, n[x], y, n[y])
    end)
  end
  return names
end

-- Records the move of `member` on `key` (`old`: its composite before the write, false or nil
-- when it had none; after the write) and its arrival in `arrivals` (nil: none kept).
local function record_move(moves, tag, key, kind, id, top, member, old, arrivals)
  old = old and tonumber(old)
  local written = redis.call('ZSCORE', key, member)
  local new = written and tonumber(written)
  if old == new then return end
  local tied_old = old and redis.call('ZCOUNT', key, old, old) or 0
  local mine = 0
  if arrivals and tied_old > 0 then
    mine = arrival(redis.call('HGET', arrivals, member), old)
    if mine > 0 then redis.call('HDEL', arrivals, member) end
  end
  if arrivals and new and redis.call('ZCOUNT', key, new, new) > 1 then
    local n = redis.call('HINCRBY', arrivals, '#', 1)
    redis.call('HSET', arrivals, member, written .. '|' .. n)
    if n == 1 then
      local expiry = redis.call('PEXPIRETIME', key)
      if expiry > 0 then redis.call('PEXPIREAT', arrivals, expiry) end
    end
  end
  local rank_was, rank_now = -1, -1
  if new then rank_now = redis.call('ZCOUNT', key, new, '+inf') - 1 end
  if old then
    -- Those above its old composite, then those of its tie that got there before it: read only
    -- for a move that reaches the top (its place is the rank its event states); a tie of more
    -- than TIE_SCAN members is taken as led by the member (Redis's order is no better).
    rank_was = redis.call('ZCOUNT', key, old, '+inf') - tied_old - ((new and new > old) and 1 or 0)
    if rank_was >= top and (rank_now < 0 or rank_now >= top) then return end
    if tied_old > 0 and tied_old <= TIE_SCAN then
      local tie = redis.call('ZRANGEBYSCORE', key, old, old)
      local records = arrivals and redis.call('HMGET', arrivals, unpack(tie)) or {}
      for i = 1, #tie do
        if tie_ahead(tie[i], arrival(records[i], old), member, mine) then rank_was = rank_was + 1 end
      end
    end
  end
  if rank_was == rank_now then return end
  local a = rank_was < 0 and math.huge or rank_was
  local b = rank_now < 0 and math.huge or rank_now
  if a >= top and b >= top then return end
  local lo, hi
  if b < a then lo, hi = b + 1, math.min(a, top) else lo, hi = a, math.min(b - 1, top - 1) end
  local line = {tag, kind, id, top, member, rank_was, rank_now, lo}
  if hi >= lo then
    -- The places' composites are Redis's ranks' (both orders sort by composite): the members
    -- holding them, whole ties included, put in notification order.
    local span_of = redis.call('ZREVRANGE', key, lo, hi, 'WITHSCORES')
    local names = {}
    -- Without a tie among them, nor one reaching past either end, the orders agree.
    local tied = false
    for i = 4, #span_of, 2 do tied = tied or span_of[i] == span_of[i - 2] end
    if #span_of > 0 and not tied then
      local first, last = span_of[2], span_of[#span_of]
      tied = redis.call('ZCOUNT', key, first, first) > 1 or redis.call('ZCOUNT', key, last, last) > 1
    end
    if #span_of > 0 and not tied then
      for i = 1, #span_of, 2 do names[#names + 1] = span_of[i] end
    elseif #span_of > 0 then
      local first, last = span_of[2], span_of[#span_of]
      local around = redis.call('ZREVRANGEBYSCORE', key, first, last, 'WITHSCORES', 'LIMIT', 0, TIE_SCAN + top + 1)
      if #around < 2 * (TIE_SCAN + top + 1) then
        local base = redis.call('ZCOUNT', key, '(' .. first, '+inf')
        local ordered = notice_order(arrivals, around)
        for r = lo, hi do names[#names + 1] = ordered[r - base + 1] end
      else
        for i = 1, #span_of, 2 do names[#names + 1] = span_of[i] end
      end
    end
    for i = 1, #names do line[8 + i] = names[i] end
  end
  moves[#moves + 1] = table.concat(line, ' ')
end

-- Appends a write's moves to the board's notices (nothing when it moved nobody). The stream
-- keeps at most NOTICES_MAX_LEN entries: past that (a bus failing for hours) the oldest moves
-- are dropped, so Redis never fills with them; the drain counts the drops (notices_dropped.lua).
local function record_moves(stream, write_id, moves)
  if #moves > 0 then
    redis.call('XADD', stream, 'MAXLEN', NOTICES_MAX_LEN, '*', 'e', write_id, 'm', table.concat(moves, '\n'))
  end
end
