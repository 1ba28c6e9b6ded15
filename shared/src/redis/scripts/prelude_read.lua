--[[
prelude_read.lua: the fence every read honours, composed first in every script (`compose` in
mod.rs) and alone with the constants in the reads a sharded board makes once a shard
(`read_script!`): a read that runs on twelve shards pays for twelve preludes, and the whole one
costs about 18 µs of Redis CPU a call to define.
]]

-- A read of a journaled board passes its guard as `guard_key` (nil: no journal) and is refused
-- like a write while the board is restored or lost, or when the period set it reads, `key`,
-- was lost (`period_state`, on the function's clock `now_ms`): a part-way board is not an
-- answer. Reads write nothing: the next write fences the board.
local function read_fence(guard_key, key, now_ms)
  if guard_key then
    local kind_id = string.match(key, '}:z:(.+)$')
    local fields = redis.call('HMGET', guard_key, GUARD_BORN, GUARD_FENCE, GUARD_KEPT .. (kind_id or ''))
    -- A move between layouts fences writes only: its old layout reads as it was.
    if (fields[2] and fields[2] ~= GUARD_MOVING) or not fields[1] then
      error({err = 'BOARD_RESTORING the board is being restored from its journal'})
    end
    if kind_id and fields[3] and redis.call('EXISTS', key) == 0 then
      local expiry = tonumber(fields[3])
      if expiry < 0 or tonumber(now_ms) < expiry then
        error({err = 'BOARD_RESTORING the board lost data its history says it holds: it is restored from its journal'})
      end
    end
  end
end

