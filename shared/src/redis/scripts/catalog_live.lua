#!lua flags=no-writes
--[[
catalog_live.lua: the runtime boards a function serves (docs/runtime-boards.md#limits), read at
one version: every definition, with why it ends for the boards being deleted. Deleted boards'
tombstones are left out: a function reads one by name when a request names it
(`catalog::record`), so what it loads is bounded by the boards defined, not by every board
ever deleted. Read-only.

KEYS[1]  definitions (hash: board -> definition JSON)
KEYS[2]  boards ended (hash: board -> {reason, at} JSON, a tombstone once the definition is gone)
KEYS[3]  version (string)
KEYS[4]  the catalog's guard (hash)

ARGV[1]  the guard's field saying the catalog's history is all in Redis (`born`)

Reply: {version or false, born (0/1), {board, definition, why it ends or false}...}
]]

local boards = {}
local definitions = redis.call('HGETALL', KEYS[1])
for i = 1, #definitions, 2 do
  boards[#boards + 1] = {definitions[i], definitions[i + 1], redis.call('HGET', KEYS[2], definitions[i])}
end
return {redis.call('GET', KEYS[3]), redis.call('HEXISTS', KEYS[4], ARGV[1]), boards}
