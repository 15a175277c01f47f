-- heartbeat. ARGV: now, worker id, holder, host, pid, version, concurrency, heartbeat
-- interval, slots (JSON text), prune age (seconds).
-- Registers the worker or refreshes its hash (a new one starts now) and its score in
-- P.."workers"; first removes the workers whose last heartbeat is older than the prune age.
-- Returns 1.
-- needs: clock, store
local now = clock(ARGV[1])
local id = ARGV[2]
local old = redis.call('ZRANGEBYSCORE', WORKERS, '-inf', '(' .. fmt(now - tonumber(ARGV[10])))
for _, w in ipairs(old) do
  redis.call('DEL', wkey(w))
  redis.call('ZREM', WORKERS, w)
end
touch_meta()
local k = wkey(id)
redis.call('HSETNX', k, 'start', fmt(now))
redis.call('HSET', k, 'holder', ARGV[3], 'host', ARGV[4], 'pid', ARGV[5], 'version', ARGV[6],
  'conc', ARGV[7], 'every', ARGV[8], 'slots', ARGV[9], 'last', fmt(now))
redis.call('ZADD', WORKERS, fmt(now), id)
return 1
