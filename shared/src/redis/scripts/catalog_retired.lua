#!lua flags=no-writes
--[[
catalog_retired.lua: a page of the tournaments whose deletion is done, in name order, each with
its tombstone (docs/tournaments.md#the-list): `GET /v1/tournaments?state=ended` lists them
beside the defined ones, for their results stay readable. Read-only.

KEYS[1]  the tournaments whose deletion is done (sorted set, every score 0: in name order)
KEYS[2]  boards ended (hash: board -> its tombstone, {reason, at, definition, players} JSON)
KEYS[3]  the catalog's guard (hash): a lost or fenced catalog is being restored

ARGV[1]  where the page starts, as ZRANGEBYLEX takes it: '(' .. the cursor ('' for the first:
         the member '' says the index was filled, define_board.lua's "index")
ARGV[2]  how many at most
ARGV[3]  the guard's field saying the catalog's history is all in Redis (`born`)
ARGV[4]  the guard's field fencing it (`fence`)

Reply: {{born or false, fence or false}, {{board, tombstone or false}...}}
]]

local page = {}
for _, board in ipairs(redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))) do
  page[#page + 1] = {board, redis.call('HGET', KEYS[2], board)}
end
return {redis.call('HMGET', KEYS[3], ARGV[3], ARGV[4]), page}
