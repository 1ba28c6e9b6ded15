#!lua
--[[
freeze_season.lua: close a finished period to events and move its board aside for archiving,
atomically. Idempotent: a re-run changes nothing and answers the same member count.

KEYS[1]  the board's guard (hash); apply_event refuses every event for a period whose
         "closed|<kind>:<id>" field is set (period_closed)
KEYS[2]  the period's live sorted set
KEYS[3]  the frozen sorted set the archive job pages through (see keys.rs `frozen`)

ARGV[1]  the guard field, "closed|<kind>:<id>"

The guard field's value is the number of members frozen. It outlives the frozen set, which the
archive job deletes once the archive is verified, so a late re-run still learns the size.

Reply: {members, present}
  members  members frozen (the guard field's value)
  present  1 while the frozen set exists; 0 once released, or when the period had no members
]]

local members = redis.call('HGET', KEYS[1], ARGV[1])
if not members then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('RENAME', KEYS[2], KEYS[3])
    -- The live board's expiry was only a backstop; the frozen set must live until verified.
    redis.call('PERSIST', KEYS[3])
  end
  members = redis.call('ZCARD', KEYS[3])
  redis.call('HSET', KEYS[1], ARGV[1], members)
end
return {tonumber(members), redis.call('EXISTS', KEYS[3])}
