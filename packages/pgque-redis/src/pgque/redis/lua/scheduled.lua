-- scheduled. ARGV: now, limit, after ("" = from the first; else a message id).
-- Returns 6 strings per scheduled message not due yet with an id above after, in id order:
-- id, group id, due time, event JSON, priority, publish time. Due ones (not yet moved into
-- their groups) are passed over, as if they had joined.
check_layout()
local now = clock(ARGV[1])
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
    if h[1] and tonumber(h[2]) > now then
      out[#out + 1] = sched_id(key)
      for j = 1, 5 do out[#out + 1] = h[j] end
      count = count + 1
      if count >= limit then break end
    end
  end
end
return out
