-- redrive. ARGV: now, "all" or "ids", then dead-letter ids (sorted, distinct) when "ids".
-- Re-publishes each dead letter at its group's tail; returns how many.
local now = clock(ARGV[1])
local ids
if ARGV[2] == 'all' then
  ids = redis.call('ZRANGE', DEAD, 0, -1)
else
  ids = {}
  for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local count = 0
for _, did in ipairs(ids) do
  if redis.call('ZSCORE', DEAD, did) then
    local d = redis.call('HMGET', dkey(did), 'g', 'b', 'p')
    publish_one(d[1], d[2], d[3], now)
    redis.call('DEL', dkey(did))
    redis.call('ZREM', DEAD, did)
    count = count + 1
  end
end
if count > 0 then redis.call('PUBLISH', WAKE, '1') end
return count
