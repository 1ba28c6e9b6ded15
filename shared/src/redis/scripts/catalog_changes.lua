#!lua flags=no-writes
--[[
catalog_changes.lua: what changed in the runtime boards' catalog since the version a warm
function holds (docs/runtime-boards.md), read at one version: the function parses only those
definitions again, not every one. Read-only.

KEYS[1]  definitions (hash: board -> definition JSON)
KEYS[2]  boards ended (hash: board -> {reason, at} JSON)
KEYS[3]  version (string)
KEYS[4]  the change log (sorted set, define_board.lua)
KEYS[5]  the catalog's guard (hash)

ARGV[1]  the version held
ARGV[2]  the guard's field saying the catalog's history is all in Redis (`born`)

Reply: {version or false, born (0/1), complete (0/1), changed}
  complete  1 when the log names every change after ARGV[1] (it started by then and counted
            every change since); 0: read the whole catalog (a log younger than the version held,
            or lost, or a change made without it)
  changed   {board, definition or false, why it ends or false} per board changed after ARGV[1]
            (empty unless complete)
]]

local version = redis.call('GET', KEYS[3])
local born = redis.call('HEXISTS', KEYS[5], ARGV[2])
local from = tonumber(redis.call('ZSCORE', KEYS[4], CATALOG_LOG_FROM) or -1)
local count = tonumber(redis.call('ZSCORE', KEYS[4], CATALOG_LOG_COUNT) or 0)
-- Whole while every change since `from` was logged: a change made without the log (a release
-- from before it, while a deployment rolls) leaves the sum short of the version.
if from < 0 or from > tonumber(ARGV[1]) or from + count ~= tonumber(version or -1) then
  return {version, born, 0, {}}
end
local changed = {}
for _, board in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. ARGV[1], '+inf')) do
  if board ~= CATALOG_LOG_FROM and board ~= CATALOG_LOG_COUNT then
    changed[#changed + 1] = {board, redis.call('HGET', KEYS[1], board), redis.call('HGET', KEYS[2], board)}
  end
end
return {version, born, 1, changed}
