#!lua
--[[
define_board.lua: creates, ends or removes a runtime board's definition (docs/runtime-boards.md)
and journals the change in the same call: a restore brings definitions back with the boards,
and a change that fails journals nothing. Every key is checked before the first write.

KEYS[1]  definitions (hash: board -> definition JSON)
KEYS[2]  boards ended (hash: board -> {reason, at} JSON): being deleted while their definition
         is still there (their writes refused), deleted once it is gone; a name once ended is
         never defined again (its journal and guard stay)
KEYS[3]  version (string: bumped by every change; functions reload definitions when it moves)
KEYS[4]  the catalog's journal (stream)
KEYS[5]  the catalog's guard (hash): a lost catalog refuses changes until it is restored
KEYS[6]  the catalog's change log (sorted set: board -> the version that last changed it,
         CATALOG_LOG_FROM -> the version from which it names every change, CATALOG_LOG_COUNT ->
         how many it logged since): a warm function reads only what changed since the version
         it holds (`catalog_changes.lua`)
KEYS[7]  the tournaments whose deletion is done (sorted set, every score 0: in name order), which
         `GET /v1/tournaments?state=ended` lists from their tombstones (`catalog_retired.lua`)

ARGV[1]  "put", "end", "remove", "replace" or "index" (once: every tournament whose deletion is
         done by a release before KEYS[7] listed there, then its member '' says so)
ARGV[2]  the board
ARGV[3]  put, replace: the definition; end: why and when it ends; remove: why and when it
         ended with its definition (kept: its archived seasons are read by it), or '' to keep
         what is there
ARGV[4]  put: how many runtime boards the deployment may hold; replace: the definition it
         replaces (a tournament's instance ended early, docs/tournaments.md); remove: '1' for a
         tournament (listed among the ended ones from then on), else '0'
ARGV[5]  the journal entry ('' when the deployment journals nothing)

Reply: put: 'created', 'same' (this very definition is there), 'exists' (another, or the board
is ending), 'full'; end: 'ending' (now or already), 'unknown'; remove: 'removed', 'unknown';
replace: 'replaced', 'changed' (the definition is not ARGV[4] any more: read it again),
'unknown'; index: 'indexed', 'same' (done before)
]]

writable(KEYS[1], 'hash')
writable(KEYS[2], 'hash')
writable(KEYS[3], 'string')
writable(KEYS[4], 'stream')
writable(KEYS[5], 'hash')
writable(KEYS[6], 'zset')
writable(KEYS[7], 'zset')
effects_begin(ARGV[5] ~= '' and KEYS[4], KEYS[5])
fence_check(KEYS[5])

local op, board = ARGV[1], ARGV[2]
if op == 'index' then
  if redis.call('ZSCORE', KEYS[7], '') then return 'same' end
  local ended = redis.call('HGETALL', KEYS[2])
  for i = 1, #ended, 2 do
    if redis.call('HEXISTS', KEYS[1], ended[i]) == 0 then
      local ok, why = pcall(cjson.decode, ended[i + 1])
      if ok and type(why) == 'table' and type(why.definition) == 'table' and why.definition.tournament then
        redis.call('ZADD', KEYS[7], 0, ended[i])
      end
    end
  end
  redis.call('ZADD', KEYS[7], 0, '')
  journal(KEYS[4], ARGV[5], op)
  return 'indexed'
end
local held = redis.call('HGET', KEYS[1], board)
local ending = redis.call('HEXISTS', KEYS[2], board) == 1
if op == 'put' then
  if held then
    if held == ARGV[3] and not ending then return 'same' end
    return 'exists'
  end
  if ending then return 'exists' end
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return 'full' end
  redis.call('HSET', KEYS[1], board, ARGV[3])
elseif op == 'replace' then
  if not held or ending then return 'unknown' end
  if held ~= ARGV[4] then return 'changed' end
  redis.call('HSET', KEYS[1], board, ARGV[3])
elseif op == 'end' then
  if not held then return 'unknown' end
  if ending then return 'ending' end
  redis.call('HSET', KEYS[2], board, ARGV[3])
else
  if not held then return 'unknown' end
  redis.call('HDEL', KEYS[1], board)
  if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], board, ARGV[3]) end
  if ARGV[4] == '1' then redis.call('ZADD', KEYS[7], 0, board) end
end
local version = redis.call('INCR', KEYS[3])
-- The log names every change after CATALOG_LOG_FROM while it counted each (CATALOG_LOG_COUNT):
-- a change made without it (a release from before the log) breaks the sum, and the log starts
-- again with this change.
local from = tonumber(redis.call('ZSCORE', KEYS[6], CATALOG_LOG_FROM) or -1)
local count = tonumber(redis.call('ZSCORE', KEYS[6], CATALOG_LOG_COUNT) or 0)
if from < 0 or from + count ~= version - 1 then
  redis.call('ZADD', KEYS[6], version - 1, CATALOG_LOG_FROM, 0, CATALOG_LOG_COUNT)
end
redis.call('ZINCRBY', KEYS[6], 1, CATALOG_LOG_COUNT)
redis.call('ZADD', KEYS[6], version, board)
journal(KEYS[4], ARGV[5], op)
if op == 'put' then return 'created' end
if op == 'end' then return 'ending' end
if op == 'replace' then return 'replaced' end
return 'removed'
