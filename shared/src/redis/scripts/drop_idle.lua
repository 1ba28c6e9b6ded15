#!lua
--[[
drop_idle.lua: on a league that drops idle players (`idle = "drop"`, docs/leagues.md), one
step of a closed period's drop: the next tiers of up to ARGV[1] players (an HSCAN step) who
did not play the period go down one tier, each with an "idle" result, so a re-run never drops
them twice. The cursor is kept in the results with the step, so a crash resumes where it
stood. Called after every cohort of the period is closed, until it answers 0.

KEYS[1]  the league's tiers (hash: user -> tier)
KEYS[2]  the period's results (hash; LEAGUE_IDLE_CURSOR: the scan's cursor, "done" at the end).
         A period without results (nobody played it, or they expired) drops nobody
KEYS[3]  the board's journal (stream, docs/journal.md)
KEYS[4]  the board's guard (hash): banned players are not dropped

ARGV[1]  players looked at per call (HSCAN's COUNT)
ARGV[2]  TTL in seconds of the results
ARGV[3]  the journal entry (JSON), "" when the journal is off
ARGV[4]  the top tier (a tier stored above it, from a longer list of tiers, counts as the top)

The cursor is the Redis process's: a drop resumed after a failover may miss players (never
drops one twice, see docs/leagues.md).

Reply: 1 while players are left to look at, 0 once done
]]

effects_begin(ARGV[3] ~= '' and KEYS[3], KEYS[4])
fence_check(KEYS[4])

local cursor = redis.call('HGET', KEYS[2], LEAGUE_IDLE_CURSOR)
if cursor == 'done' then return 0 end
if not cursor and redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local step = redis.call('HSCAN', KEYS[1], cursor or '0', 'COUNT', ARGV[1])
local top = tonumber(ARGV[4])
-- Every key written below that no check above has read (prelude.lua `writable`).
writable(KEYS[4], 'hash')
if ARGV[3] ~= '' then writable(KEYS[3], 'stream') end
local dropped = {}
for i = 1, #step[2], 2 do
  local user, tier = step[2][i], math.min(tonumber(step[2][i + 1]), top)
  if tier > 0 and redis.call('HEXISTS', KEYS[2], user) == 0
    and redis.call('HEXISTS', KEYS[4], GUARD_BAN .. user) == 0 then
    -- The bottom tier is not stored (close_league.lua).
    if tier == 1 then redis.call('HDEL', KEYS[1], user) else redis.call('HSET', KEYS[1], user, tier - 1) end
    -- league.rs `idle_outcome`: tier, no cohort, no rank, zone idle, the tier below, no score.
    redis.call('HSET', KEYS[2], user, tier .. ',0,0,idle,' .. (tier - 1) .. ',')
    dropped[#dropped + 1] = user
  end
end
local resume = step[1] == '0' and 'done' or step[1]
redis.call('HSET', KEYS[2], LEAGUE_IDLE_CURSOR, resume)
expire_once(KEYS[2], ARGV[2])
journal(KEYS[3], ARGV[3], table.concat(dropped, ','))
if resume == 'done' then return 0 end
return 1
