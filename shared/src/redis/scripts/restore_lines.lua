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
           given that absolute expiry by this restore: a later call sets it only if it changes)
KEYS[2]    the restore's checkpoint (hash: "through" -> the last stream id applied)
KEYS[3]    the restore's lock (string: the running restore's token)
KEYS[4..]  the keys the lines write, once each

ARGV[1]    the restore's token: nothing is applied unless it still holds the lock
ARGV[2]    the lock's lease in ms, renewed by this call
ARGV[3]    the stream id of the last line of this call (the checkpoint after it)
ARGV[4]    number of lines
ARGV[5..]  per line: c (commands), e (expiries); then c times: n (words), the command's name,
           the index in KEYS of its key, its n - 2 other words; then e times: the index in KEYS
           of a key the line wrote, its absolute expiry after the write in ms (-1: none, -2:
           the write left no key)

then, optionally (a reshard, docs/scaling.md#changing-shards), after the lines: the index in
           KEYS of a journal stream, and per line its entry, outcome and effects (the stream
           fields e, o and x): each line is appended there as it is applied, so the board's new
           layout journals its whole history

Reply: 1, or 0 when the lock is not this restore's (nothing applied)
]]

if raw_redis.call('GET', KEYS[3]) ~= ARGV[1] then return 0 end
raw_redis.call('PEXPIRE', KEYS[3], ARGV[2])

local time = raw_redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- What the restore decided about each key of this call before it, read at once; what it
-- decides now is written at once at the end. `status`: this call's view ('1' restoring, '0'
-- intact); `expires`: the expiry this restore last set on a key (nil: none known).
local status, expires, claims, decided = {}, {}, {}, {}
local KEEPS_EXPIRY = {ZADD = true, ZINCRBY = true, HSET = true, HINCRBY = true, HSETNX = true, SADD = true, LPUSH = true,
  INCR = true, INCRBY = true, SETBIT = true, BITFIELD = true}
if #KEYS > 3 then
  local names = {}
  for k = 4, #KEYS do names[k - 3] = KEYS[k] end
  local held = raw_redis.call('HMGET', KEYS[1], unpack(names))
  for k = 4, #KEYS do
    local claim = held[k - 3]
    if claim and string.sub(claim, 1, 2) == '1:' then
      expires[k] = tonumber(string.sub(claim, 3))
      claim = '1'
    end
    claims[k] = claim
  end
end
local expires_before = {}
for k, at in pairs(expires) do expires_before[k] = at end

-- Whether this restore writes KEYS[k]: claimed now or before, never an intact key. A key
-- whose life recorded by this line ended before now is neither claimed nor written.
local function restoring(k, expiry)
  if expiry and expiry >= 0 and expiry <= now then return false end
  local known = status[k]
  if known == nil then
    known = claims[k]
    if not known then
      known = raw_redis.call('EXISTS', KEYS[k]) == 1 and '0' or '1'
      decided[#decided + 1] = KEYS[k]
      decided[#decided + 1] = known
    end
    status[k] = known
  end
  return known == '1'
end

-- Before the first write: every command is a recorded write, and every key an earlier call of
-- this restore claimed (and wrote) holds what this call's first command on it writes, or
-- nothing. Redis keeps a script's writes made before an error: a call that failed part-way
-- would keep them, and its retry apply them again. (Keys claimed now are missing; DEL and SET
-- take a key of any type.)
local FAMILY = {ZADD = 'zset', ZREM = 'zset', ZINCRBY = 'zset', ZREMRANGEBYSCORE = 'zset', ZREMRANGEBYRANK = 'zset',
  HSET = 'hash', HDEL = 'hash', HINCRBY = 'hash', HSETNX = 'hash', SETBIT = 'string', BITFIELD = 'string',
  INCR = 'string', INCRBY = 'string', LPUSH = 'list', LTRIM = 'list', SADD = 'set', SREM = 'set'}
do
  local checked, a = {}, 5
  for _ = 1, tonumber(ARGV[4]) do
    local c, e = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    a = a + 2
    for _ = 1, c do
      local n, effect_command, k = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
      if not EFFECT[effect_command] then error({err = 'ERR ' .. effect_command .. ' is not a recorded write'}) end
      if not checked[k] then
        checked[k] = true
        local family = FAMILY[effect_command]
        if family and claims[k] == '1' then
          local held = raw_redis.call('TYPE', KEYS[k])['ok']
          if held ~= 'none' and held ~= family then
            error({err = 'WRONGTYPE a key this restore brought back holds a ' .. held .. ' now'})
          end
        end
      end
      a = a + 1 + n
    end
    a = a + 2 * e
  end
  -- The journal a reshard copies the lines to holds nothing else.
  if ARGV[a] then
    local held = raw_redis.call('TYPE', KEYS[tonumber(ARGV[a])])['ok']
    if held ~= 'none' and held ~= 'stream' then error({err = 'WRONGTYPE the journal holds a ' .. held}) end
  end
end

local a = 5
for _ = 1, tonumber(ARGV[4]) do
  local c, e = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  -- The expiries come after the commands; read them first.
  local expiry, b = {}, a
  for _ = 1, c do b = b + 1 + tonumber(ARGV[b]) end
  for i = 0, e - 1 do expiry[tonumber(ARGV[b + 2 * i])] = tonumber(ARGV[b + 2 * i + 1]) end
  for _ = 1, c do
    local n, effect_command, k = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
    if restoring(k, expiry[k]) then
      raw_redis.call(effect_command, KEYS[k], unpack(ARGV, a + 3, a + n))
      -- Anything but adding to a key may have removed it, or its expiry (SET).
      if not KEEPS_EXPIRY[effect_command] then expires[k] = nil end
    end
    a = a + 1 + n
  end
  for i = 0, e - 1 do
    local k, at = tonumber(ARGV[a + 2 * i]), tonumber(ARGV[a + 2 * i + 1])
    -- A write keeps a key's expiry: set again only when the record changes it. (A key this
    -- restore made has no expiry until it sets one; PERSIST undoes only its own.)
    if status[k] == '1' and expires[k] ~= at then
      if at > 0 then
        raw_redis.call('PEXPIREAT', KEYS[k], at)
      elseif at == -1 and expires[k] and expires[k] > 0 then
        raw_redis.call('PERSIST', KEYS[k])
      end
      expires[k] = at
    end
  end
  a = a + 2 * e
end
if ARGV[a] then
  local journal = KEYS[tonumber(ARGV[a])]
  for i = 0, tonumber(ARGV[4]) - 1 do
    local at = a + 1 + 3 * i
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
