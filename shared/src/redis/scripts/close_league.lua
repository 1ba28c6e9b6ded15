#!lua
--[[
close_league.lua: record the results of one cohort of an ended league period (or of a tier's
last small cohort ranked with the one before it, docs/leagues.md#fair-ends) and every
member's tier for the next, atomically and once (docs/leagues.md). The caller read the cohort
with read_cohort.lua and ranked it (league.rs): if anything it read has changed since, nothing
is written and the caller reads again.

KEYS[1]  the period's board (sorted set)
KEYS[2]  the period's cohorts (sorted set, see prelude_league.lua `cohort_range`)
KEYS[3]  the period's results (hash: user -> result; LEAGUE_COHORT_CLOSED .. cohort once closed)
KEYS[4]  the league's tiers (hash: user -> tier; the bottom tier, 0, is not stored)
KEYS[5]  the board's journal (stream, docs/journal.md)
KEYS[6]  the board's guard (hash): banned members are not in the cohort as read_cohort.lua reads it

ARGV[1]  the cohort, "<tier>:<n>", or the two closed as one group, "<tier>:<n>,<tier>:<n+1>"
ARGV[2]  TTL in seconds of the results
ARGV[3]  the journal entry (JSON), "" when the journal is off
ARGV[4]  k, the members read
ARGV[5]  TTL in seconds of the tiers ("0": none; a shadow replay's keys expire)
then k quadruples from ARGV[6]: member, composite as read ("" when not on the board), result
         (league.rs `Outcome::encode`), next tier

Reply: "closed" (written now), "done" (closed before: nothing written), "stale" (the cohort or
a member's score changed since it was read: nothing written)
]]

effects_begin(ARGV[3] ~= '' and KEYS[5], KEYS[6])
fence_check(KEYS[6])

local cohorts = {}
for cohort in string.gmatch(ARGV[1], '[^,]+') do cohorts[#cohorts + 1] = cohort end
for _, cohort in ipairs(cohorts) do
  if redis.call('HEXISTS', KEYS[3], LEAGUE_COHORT_CLOSED .. cohort) == 1 then return 'done' end
end
local k = tonumber(ARGV[4])
local present = 0
for _, cohort in ipairs(cohorts) do
  local low, high = cohort_range(cohort)
  for _, entry in ipairs(redis.call('ZRANGEBYLEX', KEYS[2], low, high)) do
    local member = string.sub(entry, #cohort + 2)
    if redis.call('HEXISTS', KEYS[6], GUARD_BAN .. member) == 0 then present = present + 1 end
  end
end
if present ~= k then return 'stale' end
local function in_group(member)
  for _, cohort in ipairs(cohorts) do
    if redis.call('ZSCORE', KEYS[2], cohort .. '|' .. member) then return true end
  end
  return false
end
for i = 0, k - 1 do
  local member, composite = ARGV[6 + 4 * i], ARGV[7 + 4 * i]
  if not in_group(member)
    or redis.call('HEXISTS', KEYS[6], GUARD_BAN .. member) == 1
    or (redis.call('ZSCORE', KEYS[1], member) or '') ~= composite then
    return 'stale'
  end
end
-- Every key written below that no check above has read (prelude.lua `writable`).
writable(KEYS[4], 'hash')
if ARGV[3] ~= '' then writable(KEYS[5], 'stream') end
for i = 0, k - 1 do
  local member = ARGV[6 + 4 * i]
  redis.call('HSET', KEYS[3], member, ARGV[8 + 4 * i])
  -- The bottom tier is every player's without an entry: not stored, so the hash holds only
  -- players above it (it never expires).
  if ARGV[9 + 4 * i] == '0' then
    redis.call('HDEL', KEYS[4], member)
  else
    redis.call('HSET', KEYS[4], member, ARGV[9 + 4 * i])
  end
end
-- Each cohort's mark holds the size of the group its members were ranked in: not the members
-- who ended with no score, whose result's zone is "idle" (league.rs `Outcome::encode`).
local ranked = 0
for i = 0, k - 1 do
  if not string.find(ARGV[8 + 4 * i], ',idle,', 1, true) then ranked = ranked + 1 end
end
for _, cohort in ipairs(cohorts) do redis.call('HSET', KEYS[3], LEAGUE_COHORT_CLOSED .. cohort, ranked) end
expire_once(KEYS[3], ARGV[2])
if k > 0 then expire_once(KEYS[4], ARGV[5]) end
journal(KEYS[5], ARGV[3], ARGV[1])
return 'closed'
