#!lua
--[[
ban.lua: ban or unban a user on one board, with its audit entry, atomically.

A ban sets "ban|<user>" in the board's guard, so apply_event.lua and sign_in.lua refuse every
later write for the user on this board, and removes the user from the live period boards
given (periods frozen for archiving are left as they are). Because this is one script, an
event racing the ban either ran before it (and its points are removed here) or runs after
it (and is refused). An unban removes the guard field only: scores are not restored.

KEYS[1]    the board's guard (hash)
KEYS[2]    the board's audit log (list, newest first)
KEYS[3]    the board's journal (stream, docs/journal.md)
KEYS[4]    the board's notices (stream, docs/notifications.md)
KEYS[5..]  ban only: the board's n live period sorted sets; then, on a board that keeps
           statements, the user's statement of each of them (deleted with the score, so a
           statement never explains points the user no longer has); then, on a league board,
           for each of the m live league periods its placements, cohorts and waiting players
           (the user leaves their cohort, docs/leagues.md)

ARGV[1]    member (user id)
ARGV[2]    "ban" or "unban"
ARGV[3]    audit entry (JSON); a ban also keeps it as the guard field's value
ARGV[4]    audit log length kept
ARGV[5]    the journal entry (the audit entry), appended with the periods the user was removed
           from ("<kind>:<id>", comma-separated); "" when the journal is off
ARGV[6]    m, the live league periods
ARGV[7..]  for each live period, in KEYS order: "<kind>:<id>"; then for each the top watched
           for notifications ("0": none; so n = (#ARGV - 6) / 2). Removing a member from a
           watched top records the move (prelude.lua's `record_move`, tagged so the banned user
           is told nothing)

Reply: the positions (1-based, in KEYS[5..] order) of the periods the user was removed from.
]]

effects_begin(ARGV[5] ~= '' and KEYS[3])
fence_check(KEYS[1])

local member = ARGV[1]
local removed, outcome, moves = {}, {}, {}
-- Every key written here, checked before the first write (prelude.lua `writable`).
writable(KEYS[1], 'hash')
writable(KEYS[2], 'list')
if ARGV[5] ~= '' then writable(KEYS[3], 'stream') end
if ARGV[2] == 'ban' then
  local m = tonumber(ARGV[6])
  local n = (#ARGV - 6) / 2
  local statements = #KEYS == 4 + 2 * n + 3 * m
  writable(KEYS[4], 'stream')
  for i = 1, n do writable(KEYS[4 + i], 'zset') end
  for j = 1, m do
    local at = #KEYS - 3 * (m - j)
    writable(KEYS[at - 2], 'hash')
    writable(KEYS[at - 1], 'zset')
    writable(KEYS[at], 'zset')
  end
  redis.call('HSET', KEYS[1], GUARD_BAN .. member, ARGV[3])
  for i = 1, n do
    local frozen = redis.call('HEXISTS', KEYS[1], GUARD_CLOSED .. ARGV[6 + i]) == 1
    if not frozen then
      local kind, id = string.match(ARGV[6 + i], '^([^:]*):(.*)$')
      local key, top = KEYS[4 + i], tonumber(ARGV[6 + n + i])
      local rank = top > 0 and redis.call('ZREVRANK', key, member)
      if remove_member(key, KEYS[1], kind, id, member) == 1 then
        removed[#removed + 1] = i
        outcome[#outcome + 1] = ARGV[6 + i]
        if rank then record_move(moves, 'BT', key, kind, id, top, member, rank, -1) end
      end
      if statements then redis.call('UNLINK', KEYS[4 + n + i]) end
    end
  end
  for j = 1, m do
    local at = #KEYS - 3 * (m - j)
    local placements, cohorts, waiting = KEYS[at - 2], KEYS[at - 1], KEYS[at]
    league_leave(placements, cohorts, waiting, member)
  end
else
  redis.call('HDEL', KEYS[1], GUARD_BAN .. member)
end
redis.call('LPUSH', KEYS[2], ARGV[3])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[4]) - 1)
journal(KEYS[3], ARGV[5], table.concat(outcome, ','))
record_moves(KEYS[4], '', moves)
return removed
