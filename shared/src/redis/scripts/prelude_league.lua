--[[
prelude_league.lua: the league helpers every script is composed with, after prelude.lua and
before the script's body (see `compose` in mod.rs): placing a player in a cohort, the cohorts in
order (docs/leagues.md#cohort-order), and a cohort move for the rank-change notifications
(docs/notifications.md). Like prelude.lua it defines only local functions, touches no key by
itself, and has no shebang.
]]

-- Leagues (docs/leagues.md). A period's cohorts are one sorted set, every score 0, member
-- "<tier>:<cohort>|<user>", so a cohort is the lexicographic range of its prefix.
local function cohort_range(cohort)
  return '[' .. cohort .. '|', '(' .. cohort .. '}'
end

-- A league period's cohorts in order (docs/leagues.md#cohort-order): one sorted set, every
-- score 0, an entry per placed member: "<cohort>|<composite, 16 digits>|<user>" for one with a
-- score on the period's board, "<cohort>|!<user>" for one without. So a cohort best first is
-- one ZREVRANGEBYLEX of its range (the greater member first among equal composites, as
-- ZREVRANGE orders a board; those without a score last, listed by name by `cohort_listed`) and
-- a scored member's place one ZLEXCOUNT of the entries above theirs. "<cohort>#" (outside
-- every cohort's range) says the cohort's entries are kept: the first write that needs them
-- builds them from the placements and the board; from then on every write that moves a placed
-- member keeps them.
local function order_entry(cohort, composite, member)
  if not composite or tonumber(composite) == 0 then return cohort .. '|!' .. member end
  return cohort .. '|' .. string.format('%016.0f', tonumber(composite)) .. '|' .. member
end

-- Whether `cohort`'s order is kept (`kept`: what the caller read already; nil: not read).
local function order_kept(order, cohort, kept)
  if kept == nil then kept = redis.call('ZSCORE', order, cohort .. '#') end
  return kept
end

-- Moves `member`'s entry in their cohort's order (`cohort`, nil: not placed) from composite
-- `old` to `new` (nil, false or 0: none), where that cohort's order is kept (`order_kept`);
-- `joined`: the write placed them, so they had no entry.
local function order_sync(order, cohort, member, old, new, kept, joined)
  if not cohort or not order_kept(order, cohort, kept) then return end
  local was, now = order_entry(cohort, old, member), order_entry(cohort, new, member)
  if was ~= now then
    redis.call('ZREM', order, was)
  elseif not joined then
    return
  end
  redis.call('ZADD', order, 0, now)
end

-- Puts `member` into the open cohort of their tier (`tiers`: user -> tier; absent: 0, the
-- lowest; never above `top`), opening the tier's next cohort when the open one holds `size`.
-- Every key it creates lives `ttl` seconds. Returns the cohort ("<tier>:<n>"). The cohort's
-- order is the caller's to keep (`order_sync`).
local function league_join(members, cohorts, counts, tiers, member, size, top, ttl)
  local tier = tostring(math.min(tonumber(redis.call('HGET', tiers, member) or '0'), top))
  local n = tonumber(redis.call('HGET', counts, tier) or '0')
  if n == 0 or redis.call('ZLEXCOUNT', cohorts, cohort_range(tier .. ':' .. n)) >= size then
    n = redis.call('HINCRBY', counts, tier, 1)
    expire_once(counts, ttl)
  end
  local cohort = tier .. ':' .. n
  redis.call('ZADD', cohorts, 0, cohort .. '|' .. member)
  redis.call('HSET', members, member, cohort)
  expire_once(cohorts, ttl)
  expire_once(members, ttl)
  return cohort
end

-- A user's first write of a league period places them (`league_join`), unless the period
-- before had players (placed, or still waiting themselves) and is not closed yet
-- (`prev_results` has no LEAGUE_CLOSED): their tier is not known, so they wait in `pending`
-- (user -> ms of that first write) for the close. Returns whether it placed them now, and
-- their cohort (nil: not placed).
local function league_place(members, cohorts, counts, tiers, pending, prev_members, prev_pending, prev_results, member, size,
    top, ttl, now_ms)
  local cohort = redis.call('HGET', members, member)
  if cohort then return false, cohort end
  if redis.call('EXISTS', prev_members, prev_pending) > 0 and redis.call('HEXISTS', prev_results, LEAGUE_CLOSED) == 0 then
    if redis.call('ZADD', pending, 'NX', string.format('%.0f', now_ms), member) == 1 then expire_once(pending, ttl) end
    return false, nil
  end
  return true, league_join(members, cohorts, counts, tiers, member, size, top, ttl)
end

-- Takes `member` out of their cohort of a league period (a ban). `was`: their composite on
-- the period's board before (nil: none), for the cohort's `order`.
local function league_leave(members, cohorts, order, pending, member, was)
  local cohort = redis.call('HGET', members, member)
  if cohort then
    redis.call('ZREM', cohorts, cohort .. '|' .. member)
    redis.call('HDEL', members, member)
    if order_kept(order, cohort) then redis.call('ZREM', order, order_entry(cohort, was, member)) end
  end
  redis.call('ZREM', pending, member)
end

-- A move inside the member's league cohort (`placements`, `cohorts`: the league period's keys,
-- `board` its sorted set): "<tag> <kind> <id> <cohort> <member> <before> <cohort best first…>"
-- with `before` the member's 0-based place before the write (-1: it placed them); or, for a
-- move that left the cohort's size as it was, read from its order, "<tag>W <kind> <id> <cohort>
-- <member> <before> <lo> <size> <names at places lo..>" with only the members it shifted
-- (domain/notify `Move::Cohort`). Nothing when their place and the cohort's size are unchanged. The order is the league's own
-- (services/leagues.rs `board_order`): composite, the greater member first among equals (as
-- ZREVRANGE orders them), members without a score last by name.
local function cohort_ahead(x, sx, y, sy)
  if sx and sy then
    if sx ~= sy then return sx > sy end
    return x > y
  end
  if sx then return true end
  if sy then return false end
  return x < y
end

-- Marks a name a cohort move records as holding its climber's very composite: below the
-- climber only by Redis's order of equal scores, so not passed (domain/notify `Move::Cohort`).
local COHORT_TIED = '='

-- Marks a name a cohort move records as holding no score on the period's board: not ranked,
-- in no zone, as at the close (docs/leagues.md#the-close).
local COHORT_UNSCORED = '!'

-- `sorted` (names best first) as a cohort move records them: those with no `score` marked.
local function cohort_marked(sorted, score)
  local out = {}
  for i = 1, #sorted do out[i] = (score[sorted[i]] and '' or COHORT_UNSCORED) .. sorted[i] end
  return out
end

-- The 16 digits of a scored order entry of `cohort`.
local function entry_digits(cohort, entry)
  return string.sub(entry, #cohort + 2, #cohort + 17)
end

-- `record_cohort` from the placements and the board: the cohort's names, their composites
-- (`old`: the member's before the write, 0: none), every comparison in Lua. Returns the
-- cohort's names and their composites after the write (false: none), in the same order.
local function record_cohort_read(moves, tag, board, cohorts, cohort, kind, id, member, old, joined)
  -- After the write's first writes: a cohorts key of another type (a programming error) costs
  -- this move's notice, never a write applied without its marker and journal entry.
  local names = redis.pcall('ZRANGEBYLEX', cohorts, cohort_range(cohort))
  if names.err then return {}, {} end
  for i = 1, #names do names[i] = string.sub(names[i], #cohort + 2) end
  if #names == 0 then return names, {} end
  local composites, score = redis.call('ZMSCORE', board, unpack(names)), {}
  for i = 1, #names do score[names[i]] = composites[i] and tonumber(composites[i]) end
  -- A member with no score before was ranked nowhere: recorded as placed by the write (-1).
  local place_was, place_now, was = -1, 0, old and tonumber(old) > 0 and tonumber(old)
  local ranked_before = not joined and was
  if ranked_before then place_was = 0 end
  for i = 1, #names do
    local other = names[i]
    if other ~= member then
      if ranked_before and cohort_ahead(other, score[other], member, was) then place_was = place_was + 1 end
      if cohort_ahead(other, score[other], member, score[member]) then place_now = place_now + 1 end
    end
  end
  if place_was ~= place_now or (ranked_before and not score[member]) then
    local sorted = {}
    for i = 1, #names do sorted[i] = names[i] end
    table.sort(sorted, function(x, y) return cohort_ahead(x, score[x], y, score[y]) end)
    local marked = cohort_marked(sorted, score)
    -- Ties are not passes: a climber marks the names holding its very composite.
    local mine = score[member]
    if mine and (place_was < 0 or place_now < place_was) then
      for i = 1, #sorted do
        if sorted[i] ~= member and score[sorted[i]] == mine then marked[i] = COHORT_TIED .. sorted[i] end
      end
    end
    moves[#moves + 1] = table.concat({tag, kind, id, cohort, member, place_was, table.concat(marked, ' ')}, ' ')
  end
  return names, composites
end

-- A kept cohort's members best first, from its order: the scored entries as ZREVRANGEBYLEX
-- lists them, then those without a score by name. `tie`: a climber's entry, whose equals are
-- marked (`COHORT_TIED`).
local function cohort_listed(order, cohort, tie)
  local low, high = cohort_range(cohort)
  local listed, unscored = redis.call('ZREVRANGEBYLEX', order, high, low), {}
  local names, skip = {}, #cohort + 19
  local digits = tie and entry_digits(cohort, tie)
  for i = 1, #listed do
    local entry = listed[i]
    if string.byte(entry, #cohort + 2) == 33 then
      table.insert(unscored, 1, COHORT_UNSCORED .. string.sub(entry, #cohort + 3))
    elseif entry ~= tie and entry_digits(cohort, entry) == digits then
      names[#names + 1] = COHORT_TIED .. string.sub(entry, skip)
    else
      names[#names + 1] = string.sub(entry, skip)
    end
  end
  for i = 1, #unscored do names[#names + 1] = unscored[i] end
  return names
end

-- Records the member's move in their cohort and keeps the cohort's `order` (`order_sync`),
-- building it when it is not kept yet (it expires with the period's cohorts). `old`: their
-- composite before the write (0: none); `cohort`: theirs (nil: not read, or not placed);
-- `kept`: whether its order is kept (nil: not read); `composite`: theirs after the write
-- (false: none; nil: not known). Where they had a score before (or were placed by this write)
-- and have one after, a place is a count of the entries above theirs.
local function record_cohort(moves, tag, board, placements, cohorts, order, kind, id, member, old, joined, cohort, kept,
    composite)
  cohort = cohort or redis.call('HGET', placements, member)
  if not cohort then return end
  if composite == nil then composite = redis.call('ZSCORE', board, member) end
  if order_kept(order, cohort, kept) then
    local high = '(' .. cohort .. '}'
    local scored_before = old and tonumber(old) > 0
    local was, now = order_entry(cohort, old, member), order_entry(cohort, composite, member)
    local place_was = joined and -1 or scored_before and redis.call('ZLEXCOUNT', order, '(' .. was, high)
    if was ~= now then
      redis.call('ZREM', order, was)
      redis.call('ZADD', order, 0, now)
    end
    if place_was and composite then
      local place_now = redis.call('ZLEXCOUNT', order, '(' .. now, high)
      if place_was == place_now then return end
      if joined then
        -- The cohort grew: every member's zones may have moved with its size.
        local listed = table.concat(cohort_listed(order, cohort, now), ' ')
        moves[#moves + 1] = table.concat({tag, kind, id, cohort, member, place_was, listed}, ' ')
        return
      end
      -- The same size: only the members between the two places moved (`LW`, domain/notify).
      local low, lo = '[' .. cohort .. '|', math.min(place_was, place_now)
      local shifted = redis.call('ZREVRANGEBYLEX', order, high, low, 'LIMIT', lo, math.abs(place_now - place_was) + 1)
      local digits = place_now < place_was and entry_digits(cohort, now)
      for i = 1, #shifted do
        local tied = shifted[i] ~= now and entry_digits(cohort, shifted[i]) == digits
        shifted[i] = (tied and COHORT_TIED or '') .. string.sub(shifted[i], #cohort + 19)
      end
      -- Zones are of the members with a score (the entries with digits).
      local size = redis.call('ZLEXCOUNT', order, '[' .. cohort .. '|0', '(' .. cohort .. '|:')
      moves[#moves + 1] = table.concat({tag .. 'W', kind, id, cohort, member, place_was, lo, size, table.concat(shifted, ' ')}, ' ')
      return
    end
    record_cohort_read(moves, tag, board, cohorts, cohort, kind, id, member, old, joined)
    return
  end
  local names, composites = record_cohort_read(moves, tag, board, cohorts, cohort, kind, id, member, old, joined)
  if #names == 0 then return end
  local build = {0, cohort .. '#'}
  for i = 1, #names do
    build[#build + 1] = 0
    build[#build + 1] = order_entry(cohort, composites[i], names[i])
  end
  redis.call('ZADD', order, unpack(build))
  if redis.call('PTTL', order) == -1 then
    local expiry = redis.call('PEXPIRETIME', cohorts)
    if expiry > 0 then redis.call('PEXPIREAT', order, expiry) end
  end
end
