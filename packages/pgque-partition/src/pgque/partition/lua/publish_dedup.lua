-- publish unless deduplicated. Runs after pgque.redis's common.lua (KEYS[1] = queue prefix P).
-- ARGV: now, prio, group id, event JSON, dedup key, ttl in milliseconds.
-- Returns {message id, 1 if deduplicated else 0}. The dedup key expires with its window (Redis
-- reaps expired keys itself, in bounded steps).
local now = clock(ARGV[1])
local dkey = P .. 'dd:' .. ARGV[5]
local first = redis.call('GET', dkey)
if first then
  return {first, 1}
end
local id = publish_one(ARGV[3], ARGV[4], ARGV[2], now)
redis.call('SET', dkey, id, 'PX', ARGV[6])
return {id, 0}
