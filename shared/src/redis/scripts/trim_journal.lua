#!lua
--[[
trim_journal.lua: trims a board's journal through what a drain stored in S3, unless a restore
of the board holds its lock (docs/journal.md#the-drain). A restore reads the objects it listed,
then the stream's tail: an object stored after its list, with the tail trimmed, would be read by
neither, and those lines lost while the restore answers complete. Refused, the drain leaves the
tail in the stream for the restore, and trims it on a later run (its object stored already).
In the same call the guard records the last entry trimmed (`drained`, only ever raised): a
snapshot taken before it holds less, which is how a rollback is seen (docs/journal.md#rollbacks);
and `compact`: this drain reads the packed form of effects (GUARD_PACKED, prelude_effects.lua).

KEYS[1]  the board's journal (stream)
KEYS[2]  the board's restore lock
KEYS[3]  the board's guard (absent: a journal without one, the profiles')

ARGV[1]  the oldest stream id to keep (XTRIM MINID, exact)
ARGV[2]  the last stream id trimmed (the guard's `drained`)
ARGV[3]  ms after this release's first trim of the board before its writes record packed
         effects (guard.rs PACKED_AFTER_MS; 0: at once)

Reply: the entries trimmed, or -1 when a restore holds the lock or the guard says the board was
rolled back (nothing trimmed)
]]

if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
-- Found older than its journal (docs/journal.md#rollbacks): its entries wait for the restore.
if KEYS[3] and redis.call('HEXISTS', KEYS[3], GUARD_ROLLBACK) == 1 then return -1 end
-- A guard lost is left lost (a restore records `drained` as it completes).
if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then
  local function order(id)
    local ms, seq = string.match(id or '', '^(%d+)-(%d+)$')
    return tonumber(ms or -1), tonumber(seq or -1)
  end
  local held_ms, held_seq = order(redis.call('HGET', KEYS[3], GUARD_DRAINED))
  local ms, seq = order(ARGV[2])
  if ms > held_ms or (ms == held_ms and seq > held_seq) then redis.call('HSET', KEYS[3], GUARD_DRAINED, ARGV[2]) end
  -- This drain reads effects packed (and compact text): the board's writes record compact text
  -- from now on, and packed once no drain run of the release before (which reads no packed
  -- entry) can still be reading: ARGV[3] ms after the first trim of this release (`2:<ms>`). A
  -- trim of the release before (`1`) starts the wait again.
  local held = redis.call('HGET', KEYS[3], GUARD_COMPACT)
  if held ~= GUARD_PACKED then
    local time = raw_redis.call('TIME')
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    local since = tonumber(string.match(held or '', '^' .. GUARD_PACKED .. ':(%d+)$') or '')
    if tonumber(ARGV[3]) <= 0 or (since and now - since >= tonumber(ARGV[3])) then
      redis.call('HSET', KEYS[3], GUARD_COMPACT, GUARD_PACKED)
    elseif not since then
      redis.call('HSET', KEYS[3], GUARD_COMPACT, GUARD_PACKED .. ':' .. now)
    end
  end
end
return redis.call('XTRIM', KEYS[1], 'MINID', ARGV[1])
