#!lua
--[[
join_tournament.lua: a player joins a tournament's open instance (docs/tournaments.md), at
most `max_size` players an instance however many join at once, journaled in the same call.
Joining again answers the same. Every key is read before the first write.

KEYS[1]  the tournament board's guard (hash, see apply_event.lua): bans, the instance closed
         early, the fence of a restore
KEYS[2]  the instance's players (set)
KEYS[3]  the board's journal (stream, docs/journal.md)

ARGV[1]  the player (user id)
ARGV[2]  the most players of the instance ("0": no cap)
ARGV[3]  the instance's period kind
ARGV[4]  the instance's period id
ARGV[5]  seconds the players are kept from now ("0": no TTL)
ARGV[6]  the journal entry ('' when the deployment journals nothing)

Reply: {status, players in the instance now}: 'joined' (now), 'member' (already: nothing
written), 'full' (nothing written), 'banned' or 'closed' (the instance was ended early, or
frozen for its results; nothing written)
]]

local PLAYERS, member, max_size = KEYS[2], ARGV[1], tonumber(ARGV[2])
effects_begin(ARGV[6] ~= '' and KEYS[3], KEYS[1])
local refusal = guard_refusal(KEYS[1], member, 1, function() return ARGV[3] end, function() return ARGV[4] end)
if refusal == 'banned' then return {'banned', 0} end
if refusal then return {'closed', 0} end
if redis.call('SISMEMBER', PLAYERS, member) == 1 then return {'member', redis.call('SCARD', PLAYERS)} end
local size = redis.call('SCARD', PLAYERS)
if max_size > 0 and size >= max_size then return {'full', size} end
if ARGV[6] ~= '' then writable(KEYS[3], 'stream') end
redis.call('SADD', PLAYERS, member)
expire_once(PLAYERS, ARGV[5])
journal(KEYS[3], ARGV[6], 'joined')
return {'joined', size + 1}
