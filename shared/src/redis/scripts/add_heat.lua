#!lua
--[[
add_heat.lua: add heat to one item of a decaying board, at most once per event id, in one
round trip.

KEYS[1]  where heat goes: the current hour's bucket (window boards) or the board itself
         (scale boards); a sorted set, item -> heat
KEYS[2]  the marker, a string "<fingerprint>\n<bucket>\n<heat>" kept ARGV[6] seconds: the
         event id's, or a made-up id's for heat sent without one (so a call the client
         library re-sends after a dropped connection is not applied twice)

ARGV[1]  item id
ARGV[2]  delta (positive integer)
ARGV[3]  TTL of KEYS[1] in seconds, set once, "0" for none
ARGV[4]  the bucket's start as the API shows it ("" for scale boards)
ARGV[5]  payload fingerprint
ARGV[6]  marker TTL in seconds
ARGV[7]  refusal of a first delivery: "" (none), "too_late" or
         "in_future". Checked only after the marker: a retry is a duplicate whenever it arrives

Reply: {status, bucket, heat}
  {"new", bucket, heat}        applied now; heat is the item's heat in KEYS[1] afterwards
  {"duplicate", bucket, heat}  this event id was seen with this payload: the first answer
  {"conflict", "", ""}         this event id was seen with another payload; nothing written
  {"too_late", "", ""}         a first delivery outside the event window; nothing written
  {"in_future", "", ""}
]]

local marker = KEYS[2]
local seen = redis.call('GET', marker)
if seen then
  local first_break = string.find(seen, '\n', 1, true)
  if string.sub(seen, 1, first_break - 1) ~= ARGV[5] then
    return {'conflict', '', ''}
  end
  local second_break = string.find(seen, '\n', first_break + 1, true)
  return {'duplicate', string.sub(seen, first_break + 1, second_break - 1), string.sub(seen, second_break + 1)}
end
if ARGV[7] ~= '' then return {ARGV[7], '', ''} end

local heat = redis.call('ZINCRBY', KEYS[1], ARGV[2], ARGV[1])
-- Set once, on the bucket's first heat, and never refreshed.
if ARGV[3] ~= '0' then redis.call('EXPIRE', KEYS[1], ARGV[3], 'NX') end
redis.call('SET', marker, ARGV[5] .. '\n' .. ARGV[4] .. '\n' .. heat, 'EX', ARGV[6])
return {'new', ARGV[4], heat}
