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
-- A read of a season's live set is refused PERIOD_CLOSED once the archive has closed it
-- (docs/archival.md#live-routes: its set renamed to the frozen one, then freed): on a
-- deployment without a journal it passes the guard too, with `now_ms` 0, for that alone.
local function read_fence(guard_key, key, now_ms)
  if guard_key then
    local kind_id = string.match(key, '}:z:(.+)$')
    local closed = kind_id and string.find(kind_id, '^season:') and (GUARD_CLOSED .. kind_id)
    if tonumber(now_ms) == 0 then
      if closed and redis.call('HEXISTS', guard_key, closed) == 1 then error({err = PERIOD_CLOSED}) end
      return
    end
    local fields = redis.call('HMGET', guard_key, GUARD_BORN, GUARD_FENCE, GUARD_KEPT .. (kind_id or ''), closed or GUARD_BORN)
    -- A move between layouts fences writes only: its old layout reads as it was.
    if (fields[2] and fields[2] ~= GUARD_MOVING) or not fields[1] then
      error({err = 'BOARD_RESTORING the board is being restored from its journal'})
    end
    if closed and fields[4] then error({err = PERIOD_CLOSED}) end
    if kind_id and fields[3] and redis.call('EXISTS', key) == 0 then
      local expiry = tonumber(fields[3])
      if expiry < 0 or tonumber(now_ms) < expiry then
        error({err = 'BOARD_RESTORING the board lost data its history says it holds: it is restored from its journal'})
      end
    end
  end
end
