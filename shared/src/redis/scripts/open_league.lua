#!lua
--[[
open_league.lua: once every cohort of an ended league period is closed, place the players of
the next period who wrote before the close, in the order they first wrote, then mark the
ended period closed so the write scripts place the next ones themselves (docs/leagues.md).
Called until it answers 0; each call places at most ARGV[1].

KEYS[1]  the board's guard (hash): banned players are not placed
KEYS[2]  the ended period's results (hash); LEAGUE_CLOSED is set when nobody waits any more
KEYS[3]  the next period's placements (hash)
KEYS[4]  the next period's cohorts (sorted set)
KEYS[5]  the next period's cohort counts (hash)
KEYS[6]  the league's tiers (hash)
KEYS[7]  the next period's waiting players (sorted set: user -> ms of their first write)
KEYS[8]  the board's journal (stream, docs/journal.md)
KEYS[9]  the next period's cohorts in order (sorted set, prelude_league.lua `order_entry`)
KEYS[10] the next period's board (sorted set): a player placed here joins their cohort's order

ARGV[1]  most players to place in this call
ARGV[2]  cohort size
ARGV[3]  the top tier
ARGV[4]  TTL in seconds of the next period's keys
ARGV[5]  TTL in seconds of the ended period's results
ARGV[6]  the journal entry (JSON), "" when the journal is off

Reply: players still waiting (0: the period is closed)
]]

effects_begin(ARGV[6] ~= '' and KEYS[8], KEYS[1])
fence_check(KEYS[1])

if redis.call('HEXISTS', KEYS[2], LEAGUE_CLOSED) == 1 then return 0 end
local waiting = redis.call('ZRANGE', KEYS[7], 0, tonumber(ARGV[1]) - 1)
local size, top = tonumber(ARGV[2]), tonumber(ARGV[3])
-- Every key written (or read after the first write) that no check above has read (prelude.lua
-- `writable`).
writable(KEYS[1], 'hash')
writable(KEYS[3], 'hash')
writable(KEYS[4], 'zset')
writable(KEYS[5], 'hash')
writable(KEYS[6], 'hash')
writable(KEYS[9], 'zset')
writable(KEYS[10], 'zset')
if ARGV[6] ~= '' then writable(KEYS[8], 'stream') end
local placed = {}
for _, member in ipairs(waiting) do
  if redis.call('HEXISTS', KEYS[1], GUARD_BAN .. member) == 0 and redis.call('HEXISTS', KEYS[3], member) == 0 then
    local cohort = league_join(KEYS[3], KEYS[4], KEYS[5], KEYS[6], member, size, top, ARGV[4])
    placed[#placed + 1] = member .. '=' .. cohort
    if order_kept(KEYS[9], cohort) then
      redis.call('ZADD', KEYS[9], 0, order_entry(cohort, redis.call('ZSCORE', KEYS[10], member), member))
    end
  end
  redis.call('ZREM', KEYS[7], member)
end
local left = redis.call('ZCARD', KEYS[7])
if left == 0 then
  redis.call('HSET', KEYS[2], LEAGUE_CLOSED, 1)
  expire_once(KEYS[2], ARGV[5])
end
if #waiting > 0 or left == 0 then journal(KEYS[8], ARGV[6], table.concat(placed, ',')) end
return left
