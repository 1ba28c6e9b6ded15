#!lua
--[[
restore_lines.lua: a restore applies the recorded effects of a run of journal lines to one
board (docs/journal.md#restore), and records how far it got, in one call: a restore killed at
any instant has applied exactly the lines its checkpoint says.

A key is restored only if it was lost: the first time the restore meets a key, a key that
exists is intact and is never written by this restore; a missing one is claimed, and every
recorded command on it is applied from there on, in the board's order of writes. A key whose
recorded expiry has passed is not written at all (it would be gone by now).

KEYS[1]    the restore's claims (hash: key -> "0" intact, "1" claimed, "1:<ms>" claimed and
           given that absolute expiry by this restore: a later call sets it only if it changes;
           CLAIM_ALL -> the snapshot's point: a rollback's restore, docs/journal.md#rollbacks,
           whose calls after that point write every key they name as it stands)
KEYS[2]    the restore's checkpoint (hash: "through" -> the last stream id applied)
KEYS[3]    the restore's lock (string: the running restore's token)
KEYS[4..]  the keys the lines write, once each

ARGV[1]    the restore's token: nothing is applied unless it still holds the lock
ARGV[2]    the lock's lease in ms, renewed by this call
ARGV[3]    the stream id of the last line of this call (the checkpoint after it)
ARGV[4]    the checkpoint this call goes on from ('' none yet; '*' any): a restore sends the
           next call before this one has answered, and that one applies nothing unless this
           one did
ARGV[5]    K, the number of keys the lines write (KEYS[4..K + 3])
ARGV[6]    M, the number of commands
ARGV[7..]  per key, in KEYS' order: the type its first command writes ('any': a command that
           takes a key of any type; '-': the call has no command on it, only its expiry), and
           its last recorded absolute expiry in ms ('' none recorded, -1 none, -2 the write left
           no key); then M times: n, the command's name, the index in KEYS of its key, its n
           other words. The restore packs them (redis/restore/run.rs): commands in each key's
           order of writes, folded per key, none on a key whose recorded life has ended.

then, optionally (a reshard, docs/scaling.md#changing-shards), after the commands: the index in
           KEYS of a journal stream, the number of lines L, and L times the line's entry,
           outcome and effects (the stream fields e, o and x): each line is appended there as it
           is applied, so the board's new layout journals its whole history

Reply: 1; 0 when the lock is not this restore's, 2 when the checkpoint is not ARGV[4] (an
earlier call failed): nothing applied
]]

if raw_redis.call('GET', KEYS[3]) ~= ARGV[1] then return 0 end
if ARGV[4] ~= '*' and (raw_redis.call('HGET', KEYS[2], 'through') or '') ~= ARGV[4] then return 2 end
raw_redis.call('PEXPIRE', KEYS[3], ARGV[2])

local nkeys, ncommands = tonumber(ARGV[5]), tonumber(ARGV[6])
-- What the restore decided about each key before this call, read at once; what it decides now
-- is written at once at the end. `status`: '1' restoring, '0' intact, nil undecided (a key the
-- call only has an expiry for); `expires`: the expiry this restore last set on a key.
local status, expires, claims, decided = {}, {}, {}, {}
for first = 1, nkeys, 1000 do
  local last = math.min(first + 999, nkeys)
  local names = {}
  for i = first, last do names[#names + 1] = KEYS[3 + i] end
  local held = raw_redis.call('HMGET', KEYS[1], unpack(names))
  for i = first, last do
    local claim = held[i - first + 1]
    if claim and string.sub(claim, 1, 2) == '1:' then
      expires[3 + i] = tonumber(string.sub(claim, 3))
      claim = '1'
    end
    claims[3 + i] = claim
  end
end

-- A rollback's restore (docs/journal.md#rollbacks): up to the snapshot's point, keys are judged
-- as in any restore (one the snapshot holds is intact, a missing one comes back from the start);
-- a call after it (the restore never mixes the two) writes every key it names as it stands,
-- those judged intact too.
local after_point = false
local point = raw_redis.call('HGET', KEYS[1], CLAIM_ALL)
if point and point ~= '' then
  local function order(id)
    local ms, seq = string.match(id, '^(%d+)-(%d+)$')
    return tonumber(ms or -1), tonumber(seq or -1)
  end
  local ms, seq = order(ARGV[3])
  local point_ms, point_seq = order(point)
  after_point = ms > point_ms or (ms == point_ms and seq > point_seq)
end
if after_point then
  for i = 1, nkeys do
    if claims[3 + i] == '0' then
      claims[3 + i] = '1'
      decided[#decided + 1] = KEYS[3 + i]
      decided[#decided + 1] = '1'
    end
  end
end

-- Before the first write: every command is a recorded write, and every key an earlier call of
-- this restore claimed (and wrote) holds what this call's first command on it writes, or
-- nothing. Redis keeps a script's writes made before an error: a call that failed part-way
-- would keep them, and its retry apply them again.
local a = 7 + 2 * nkeys
for _ = 1, ncommands do
  if not EFFECT[ARGV[a + 1]] then error({err = 'ERR ' .. ARGV[a + 1] .. ' is not a recorded write'}) end
  a = a + 3 + tonumber(ARGV[a])
end
-- The journal a reshard copies the lines to holds nothing else.
if ARGV[a] then
  local held = raw_redis.call('TYPE', KEYS[tonumber(ARGV[a])])['ok']
  if held ~= 'none' and held ~= 'stream' then error({err = 'WRONGTYPE the journal holds a ' .. held}) end
end
local undecided = {}
for i = 1, nkeys do
  local k, family = 3 + i, ARGV[5 + 2 * i]
  if claims[k] then
    status[k] = claims[k]
    if claims[k] == '1' and family ~= '-' and family ~= 'any' then
      local held = raw_redis.call('TYPE', KEYS[k])['ok']
      if held ~= 'none' and held ~= family then
        error({err = 'WRONGTYPE a key this restore brought back holds a ' .. held .. ' now'})
      end
    end
  elseif family ~= '-' then
    undecided[#undecided + 1] = k
  end
end
-- A key is restored only if it was lost: met for the first time, a key that exists is intact
-- and never written by this restore; a missing one is claimed. Asked of many keys at once (a
-- whole loss answers 0, an intact board all of them), halving only where the answer is mixed.
local function decide(lo, hi)
  local names = {}
  for i = lo, hi do names[#names + 1] = KEYS[undecided[i]] end
  local found = raw_redis.call('EXISTS', unpack(names))
  if found == 0 or found == hi - lo + 1 then
    local known = found == 0 and '1' or '0'
    for i = lo, hi do
      status[undecided[i]] = known
      decided[#decided + 1] = KEYS[undecided[i]]
      decided[#decided + 1] = known
    end
  else
    local mid = math.floor((lo + hi) / 2)
    decide(lo, mid)
    decide(mid + 1, hi)
  end
end
-- After a rollback's point, nothing met is intact.
if after_point then
  for i = 1, #undecided do
    status[undecided[i]] = '1'
    decided[#decided + 1] = KEYS[undecided[i]]
    decided[#decided + 1] = '1'
  end
  undecided = {}
end
for first = 1, #undecided, 1000 do decide(first, math.min(first + 999, #undecided)) end

local expires_before = {}
for k, at in pairs(expires) do expires_before[k] = at end
local KEEPS_EXPIRY = {ZADD = true, ZINCRBY = true, HSET = true, HINCRBY = true, HSETNX = true, SADD = true, LPUSH = true,
  INCR = true, INCRBY = true, SETBIT = true, BITFIELD = true}
a = 7 + 2 * nkeys
local wrote = {}
for _ = 1, ncommands do
  local n, effect_command, k = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  if status[k] == '1' then
    raw_redis.call(effect_command, KEYS[k], unpack(ARGV, a + 3, a + 2 + n))
    wrote[k] = true
    -- Anything but adding to a key may have removed it, or its expiry (SET).
    if not KEEPS_EXPIRY[effect_command] then expires[k] = nil end
  end
  a = a + 3 + n
end
-- Each key restored ends with the last expiry its lines recorded: set only when that changes
-- (a key this restore made has none until it sets one; PERSIST undoes only its own). One in
-- the past removes the key: its life had ended by now. The restore packs runs by its own
-- reading of Redis's clock; Redis's may have passed an expiry an earlier call set since (the
-- key gone with it): a key this call wrote again gets that expiry again, so it goes at once
-- instead of living for ever.
local clock = raw_redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
for i = 1, nkeys do
  local k, at = 3 + i, tonumber(ARGV[6 + 2 * i])
  if at and status[k] == '1' and (expires[k] ~= at or (wrote[k] and at > 0 and at <= now_ms)) then
    if at > 0 then
      raw_redis.call('PEXPIREAT', KEYS[k], ARGV[6 + 2 * i])
    elseif at == -1 and expires[k] and expires[k] > 0 then
      raw_redis.call('PERSIST', KEYS[k])
    end
    expires[k] = at
  end
end
if ARGV[a] then
  local journal = KEYS[tonumber(ARGV[a])]
  for i = 0, tonumber(ARGV[a + 1]) - 1 do
    local at = a + 2 + 3 * i
    raw_redis.call('XADD', journal, '*', 'e', ARGV[at], 'o', ARGV[at + 1], 'x', ARGV[at + 2])
  end
end
-- Claims decided now, and the expiries this call changed on claimed keys.
for k, known in pairs(status) do
  if known == '1' and expires[k] ~= expires_before[k] then
    decided[#decided + 1] = KEYS[k]
    decided[#decided + 1] = expires[k] and ('1:' .. expires[k]) or '1'
  end
end
for i = 1, #decided, 2000 do
  raw_redis.call('HSET', KEYS[1], unpack(decided, i, math.min(i + 1999, #decided)))
end
raw_redis.call('HSET', KEYS[2], 'through', ARGV[3])
return 1
