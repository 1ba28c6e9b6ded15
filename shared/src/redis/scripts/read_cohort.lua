#!lua flags=no-writes
--[[
read_cohort.lua: a user's tier and league cohort of one period with every member's composite
on the period's board, or one cohort's, from one snapshot (docs/leagues.md).

KEYS[1]  the period's placements (hash: user -> "<tier>:<cohort>")
KEYS[2]  the period's cohorts (sorted set, see prelude_league.lua `cohort_range`)
KEYS[3]  the league's tiers (hash: user -> tier; absent: 0)
KEYS[4]  the period's board (sorted set)
KEYS[5]  the board's guard (hash): banned members are left out (a ban after the period's event
         window no longer reaches its cohorts, see ban.lua)

ARGV[1]  the user, or "" to read the cohort ARGV[2] ("<tier>:<n>")
ARGV[3]  now (ms, the function's clock) on a journaled deployment, "" otherwise: a board being
         restored, or whose period set KEYS[4] the guard records as live then and is missing,
         answers BOARD_RESTORING (prelude_read.lua `read_fence`): a cohort whose scores were lost is
         no answer, and no close

Reply: {tier, cohort, member1, composite1, member2, …}: tier the user's tier for their next
placement ("" when reading by cohort), cohort "" when the user has none this period; a member
not on the board has composite "".
]]

if ARGV[3] ~= '' then read_fence(KEYS[5], KEYS[4], ARGV[3]) end
local user, cohort = ARGV[1], ARGV[2]
local reply = {'', ''}
if user ~= '' then
  reply[1] = redis.call('HGET', KEYS[3], user) or '0'
  cohort = redis.call('HGET', KEYS[1], user) or ''
end
if cohort == '' then return reply end
reply[2] = cohort
local low, high = cohort_range(cohort)
local prefix = #cohort + 2
for _, entry in ipairs(redis.call('ZRANGEBYLEX', KEYS[2], low, high)) do
  local member = string.sub(entry, prefix)
  if redis.call('HEXISTS', KEYS[5], GUARD_BAN .. member) == 0 then
    reply[#reply + 1] = member
    reply[#reply + 1] = redis.call('ZSCORE', KEYS[4], member) or ''
  end
end
return reply
