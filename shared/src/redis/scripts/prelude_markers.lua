--[[
prelude_markers.lua: the event-id markers of apply_event.lua and submit_score.lua, composed
after prelude.lua (see `compose` in mod.rs; it uses `fence_lost`): local functions only, no
shebang, no key of its own.

A board's markers are fields of its marker buckets (a hash a shard of a local day, kept to the
end of the next day). A bucket lost alone (a bad DEL, an eviction: buckets have a TTL) would let
the retry of an event it held be applied again, so on a journaled board (docs/journal.md#losses)
the write that creates a bucket writes MARKER_HELD in it and records it in the guard (a bit a
bucket, MARKS_GROUP buckets of a local day a field: GUARD_MARKS .. '<group>|<day mod 3>' holding
"<day>|<the earliest of their expiries, ms>|" and MARKS_GROUP / 4 hex digits, so each stays a
short value and the fields of a day three days gone are the ones that day's record takes over), and a write that finds a bucket it
reads without MARKER_HELD while the guard records it fences the board, nothing else written. A
bucket from before this record (no MARKER_HELD, not recorded) is recorded by its next write
that finds it so, as a new one would be.
]]

local MARKS_GROUP = 128
local NO_MARKS = string.rep('0', MARKS_GROUP / 4)

-- The guard's field recording local day `day`'s bucket shard `shard`.
local function marks_field(day, shard)
  return GUARD_MARKS .. math.floor(shard / MARKS_GROUP) .. '|' .. day % 3
end

-- The hex digit of `shard` in a record's digits, and its bit.
local function marks_digit(shard)
  local at = shard % MARKS_GROUP
  return math.floor(at / 4) + 1, bit.lshift(1, at % 4)
end

-- A marker bucket's field, and whether the bucket is held (MARKER_HELD; false when it does not
-- exist). Releases before 2026-11-25 kept heat and sign-in markers as strings at
-- `evt:<event id>`, so an id such as `20782:5` may have left a string where a bucket now lives:
-- that string is deleted (its 48 h were the old release's) rather than wedging the shard until
-- it expires.
local function marker_field(bucket, field)
  local seen = redis.pcall('HMGET', bucket, field, MARKER_HELD)
  if seen.err then
    if redis.call('TYPE', bucket).ok ~= 'hash' then redis.call('DEL', bucket) end
    return false, false
  end
  return seen[1], seen[2]
end

-- Where an event id's marker field is among a board's marker buckets (today's, the day
-- before, the day after; `after` false when the caller's day is not near its end, so no
-- marker can be there yet): "conflict" for another payload's fingerprint, "<i><receipt>" for
-- this payload's (i: 0 today, 1 the day before, 2 the day after), nil when unseen; then, when
-- unseen, the days of the buckets read that are not held, as offsets from today (`markers_check`).
local function marker_seen(today, before, after, field, fingerprint)
  local gone = {}
  local seen, held = marker_field(today, field)
  local i = 0
  if not held then gone[#gone + 1] = 0 end
  if not seen then
    seen, held = marker_field(before, field)
    i = 1
    if not held then gone[#gone + 1] = -1 end
  end
  if not seen and after then
    seen, held = marker_field(after, field)
    i = 2
    if not held then gone[#gone + 1] = 1 end
  end
  if not seen then return nil, gone end
  if string.sub(seen, 1, 4) ~= fingerprint then return 'conflict' end
  return i .. string.sub(seen, 5)
end

-- The expiry (ms, Redis's clock) and digits `record` (a guard's marks field) holds for local
-- day `day`; nil: none.
local function marks_of(record, day)
  if not record then return nil end
  local held, expiry, digits = string.match(record, '^(%d+)|(%-?%d+)|(%x+)$')
  if tonumber(held) ~= day then return nil end
  return tonumber(expiry), digits
end

-- A journaled write's check of the buckets it read not held (`gone`, marker_seen's; the event
-- unseen) for its local day `day`'s bucket shard `shard`: fences the board (and refuses) when
-- the guard records one of them while, by Redis's clock, none of that record's buckets can have
-- expired yet (its earliest expiry, a second's margin: a queue's message dated the day before, a
-- restore deciding writes again at their time, a clock ahead, read buckets whose time is up).
-- Returns whether today's bucket is created by this write, and the guard's field for it.
local function markers_check(guard_key, gone, day, shard)
  if not effects or #gone == 0 then return false end
  local fields = {}
  for i, offset in ipairs(gone) do fields[i] = marks_field(day + offset, shard) end
  local records = redis.call('HMGET', guard_key, unpack(fields))
  local at, flag = marks_digit(shard)
  local creates, recorded, now = false, nil, nil
  for i, offset in ipairs(gone) do
    local expiry, digits = marks_of(records[i], day + offset)
    if digits and bit.band(tonumber(string.sub(digits, at, at), 16), flag) ~= 0 then
      if not now then
        local time = raw_redis.call('TIME')
        now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
      end
      if expiry < 0 or now + 1000 < expiry then fence_lost(guard_key) end
    end
    if offset == 0 then creates, recorded = true, records[i] end
  end
  return creates, recorded
end

-- Records that this write created local day `day`'s bucket shard `shard` (`markers_check`
-- said so; `record` the guard's field for it as read), once the bucket has its TTL:
-- MARKER_HELD in the bucket, its bit and expiry in the field (the earliest of its buckets'; a
-- field holding another day's is taken over).
local function marker_created(guard_key, bucket, record, day, shard)
  redis.call('HSET', bucket, MARKER_HELD, 1)
  local expiry, digits = marks_of(record, day)
  digits = digits or NO_MARKS
  local mine = redis.call('PEXPIRETIME', bucket)
  if not expiry or (mine >= 0 and (expiry < 0 or mine < expiry)) then expiry = mine end
  local at, flag = marks_digit(shard)
  local digit = bit.bor(tonumber(string.sub(digits, at, at), 16), flag)
  digits = string.sub(digits, 1, at - 1) .. string.format('%x', digit) .. string.sub(digits, at + 1)
  redis.call('HSET', guard_key, marks_field(day, shard), string.format('%d|%.0f|%s', day, expiry, digits))
end
