#!lua
--[[
freeze_season.lua: close a finished period to events and move its board aside for archiving,
atomically. Idempotent: a re-run changes nothing and answers the same member count.

KEYS[1]  the board's guard (hash); apply_event refuses every event for a period whose
         "closed|<kind>:<id>" field is set (period_closed)
KEYS[2]  the period's live sorted set
KEYS[3]  the frozen sorted set the archive job pages through (see keys.rs `frozen`)

ARGV[1]  the guard field, "closed|<kind>:<id>"
ARGV[2]  the guard field the write scripts set when the period's board is created,
         "live|<kind>:<id>"
ARGV[3]  the guard field the write scripts set when a take-back, correction, ban or void
         empties the period's board, "emptied|<kind>:<id>"
ARGV[4]  the function's clock (ms) when the board is journaled, "0" when not. Journaled, a
         guard not born, or fenced, is a board lost or being restored, and the freeze is
         refused (BOARD_RESTORING) with nothing written, so no field of a lost guard makes it
         look intact to the restore that follows; a period set the guard records
         (`kept|<kind>:<id>`, before its expiry on that clock) and Redis lost fences the board
         (prelude.lua `fence_lost`) and is refused the same way
ARGV[5]  the fence the caller holds ("moving": a move freezing its own old shard), which
         passes the check above; "" none

The closed field's value is the number of members frozen. It outlives the frozen set, which the
archive job deletes once the archive is verified, so a late re-run still learns the size. A
period whose board was created but is gone (expired, evicted) is closed with the value "lost":
it is never reported as an empty period. A period with no board and neither field (never
played, or flushed with its guard: Redis cannot tell) is closed with "unwitnessed", for the
archive job to decide from what it saw while the period ran.

Reply: {members, present, lost, unwitnessed}
  members      members frozen (the closed field's value; 0 when lost or unwitnessed)
  present      1 while the frozen set exists; 0 once released, or when the period had none
  lost         1 when the period's board had members and vanished before it was frozen
  unwitnessed  1 when nothing in Redis says whether the period had members
]]

if ARGV[4] ~= '0' then
  local state = redis.call('HMGET', KEYS[1], GUARD_BORN, GUARD_FENCE, ARGV[1], GUARD_KEPT .. string.sub(ARGV[1], #GUARD_CLOSED + 1))
  if (state[2] and state[2] ~= ARGV[5]) or not state[1] then
    error({err = 'BOARD_RESTORING the board is being restored from its journal'})
  end
  -- A set the guard records (docs/journal.md#losses) and Redis lost while the guard survived:
  -- the journal brings it back, so the board is fenced and the freeze refused (nothing else
  -- written), where closing the period 'lost' would have kept it lost after the restore.
  if not state[3] and state[4] and redis.call('EXISTS', KEYS[2]) == 0 then
    local expiry = tonumber(state[4])
    if expiry < 0 or tonumber(ARGV[4]) < expiry then fence_lost(KEYS[1]) end
  end
end
local members = redis.call('HGET', KEYS[1], ARGV[1])
if not members then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('RENAME', KEYS[2], KEYS[3])
    -- The live board's expiry was only a backstop; the frozen set must live until verified.
    redis.call('PERSIST', KEYS[3])
    members = redis.call('ZCARD', KEYS[3])
  elseif redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
    members = 'lost'
  elseif redis.call('HEXISTS', KEYS[1], ARGV[3]) == 1 then
    members = 0
  else
    members = 'unwitnessed'
  end
  redis.call('HSET', KEYS[1], ARGV[1], members)
  redis.call('HDEL', KEYS[1], ARGV[2], ARGV[3])
end
-- Frozen, not lost (prelude.lua `period_state`): a closed period's set is never live again, so
-- no record of it stays, whichever call closed it (a restore replays the writes that recorded
-- it after the close it brought back).
redis.call('HDEL', KEYS[1], GUARD_KEPT .. string.sub(ARGV[1], #GUARD_CLOSED + 1))
if members == 'lost' then return {0, 0, 1, 0} end
if members == 'unwitnessed' then return {0, 0, 0, 1} end
return {tonumber(members), redis.call('EXISTS', KEYS[3]), 0, 0}
