-- nack. ARGV: now, group id, token, message id, delay. Returns 1, or 0 if not held.
local now = clock(ARGV[1])
local gid, token, mid = ARGV[2], ARGV[3], ARGV[4]
if not held(gid, token, mid) then return 0 end
local prio = redis.call('HGET', gkey(gid), 'prio')
local at = fmt(now + tonumber(ARGV[5]))
redis.call('HDEL', gkey(gid), 'token')
redis.call('HSET', gkey(gid), 'at', at)
redis.call('ZADD', rkey(prio), at, gid)
if tonumber(ARGV[5]) <= 0 then redis.call('PUBLISH', WAKE, '1') end
return 1
