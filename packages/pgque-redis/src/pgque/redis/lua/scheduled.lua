-- scheduled. ARGV: now, limit, after ("" = from the first; else a message id).
-- Returns 6 strings per scheduled message not due yet with an id above after, in id order:
-- id, group id, due time, event JSON, priority, publish time; or nil (false) when more than a
-- batch was due (see more_due): the transport moves the rest by join_due.lua calls and asks
-- again, so no page reads past a backlog of due messages in one script.
-- needs: clock, store, enqueue
check_layout()
local now = clock(ARGV[1])
-- Listed as if every due scheduled message had joined its group: they join now.
if more_due(now) then return false end
local limit = tonumber(ARGV[2])
local low = '-inf'
if ARGV[3] ~= '' then low = '(' .. ARGV[3] end
local out = {}
local count = 0
while count < limit do
  local keys = redis.call('ZRANGEBYSCORE', SIDS, low, '+inf', 'WITHSCORES', 'LIMIT', 0,
    math.max(limit - count, 64))
  if #keys == 0 then break end
  for i = 1, #keys, 2 do
    local key = keys[i]
    low = '(' .. keys[i + 1]
    local h = redis.call('HMGET', skey(key), 'g', 'd', 'b', 'p', 't')
    if not h[1] then
      -- Its hash vanished outside pgque (eviction, a manual DEL): nothing to list, ever.
      redis.call('ZREM', SCHED, key)
      redis.call('ZREM', SIDS, key)
    elseif tonumber(h[2]) > now then
      out[#out + 1] = sched_id(key)
      for j = 1, 5 do out[#out + 1] = h[j] end
      count = count + 1
      if count >= limit then break end
    end
  end
end
return out
