#!lua
--[[
grant_attempts.lua: an admin grants a player more attempts in a tournament's open instance
(docs/tournaments.md#live-edits), with its audit entry and journal line, exactly once per grant
id, atomically. Every key is checked before the first write.

KEYS[1]  the tournament board's guard (hash, see apply_event.lua): bans, the instance closed
         early or frozen, the fence of a restore
KEYS[2]  the instance's entries (hash: member -> submissions counted against max_entries; a
         grant lowers the count, below 0 when it gives more than were used)
KEYS[3]  the board's audit log (list, newest first)
KEYS[4]  the grant's marker: string "<fingerprint>\n<reply>", kept ARGV[9] seconds (unused
         when ARGV[8] is '')
KEYS[5]  the board's journal (stream, docs/journal.md)

ARGV[1]  the player (user id)
ARGV[2]  attempts to add (a positive integer)
ARGV[3]  the instance's period kind
ARGV[4]  the instance's period id
ARGV[5]  seconds the entries are kept from now ("0": no TTL)
ARGV[6]  the audit entry (JSON; also the journal entry)
ARGV[7]  audit log length kept
ARGV[8]  the grant's payload fingerprint ('': no grant id, nothing to recognise a retry by)
ARGV[9]  marker TTL in seconds
ARGV[10] 1 when the deployment journals, else 0

Reply: {status, count}: 'granted' with the player's submissions counted now, 'duplicate'
(this grant id was seen with this payload; the count it answered then), 'conflict' (seen with
another payload), 'banned' or 'closed' (nothing written)
]]

local ENTRIES, member, add = KEYS[2], ARGV[1], tonumber(ARGV[2])
local journaled = ARGV[10] == '1'
effects_begin(journaled and KEYS[5], KEYS[1])
if ARGV[8] ~= '' then
  local seen = replay(KEYS[4], ARGV[8])
  if seen then return {seen[1], tonumber(seen[2]) or 0} end
end
local refusal = guard_refusal(KEYS[1], member, 1, function() return ARGV[3] end, function() return ARGV[4] end)
if refusal == 'banned' then return {'banned', 0} end
if refusal then return {'closed', 0} end
writable(ENTRIES, 'hash')
countable(ENTRIES, member)
writable(KEYS[3], 'list')
if ARGV[8] ~= '' then writable(KEYS[4], 'string') end
if journaled then writable(KEYS[5], 'stream') end
local count = redis.call('HINCRBY', ENTRIES, member, -add)
expire_once(ENTRIES, ARGV[5])
redis.call('LPUSH', KEYS[3], ARGV[6])
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[7]) - 1)
if ARGV[8] ~= '' then redis.call('SET', KEYS[4], ARGV[8] .. '\n' .. count, 'EX', ARGV[9]) end
if journaled then journal(KEYS[5], ARGV[6], tostring(count)) end
return {'granted', count}
