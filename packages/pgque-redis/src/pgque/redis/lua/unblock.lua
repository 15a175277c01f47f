-- unblock. ARGV: now, group id, drop_head ("1"/"0"), reason for a dropped head.
-- Returns 1, or 0 if the group is not blocked.
local now = clock(ARGV[1])
local gid = ARGV[2]
local g = gkey(gid)
if redis.call('HGET', g, 'blocked') ~= '1' then return 0 end
local prio = redis.call('HGET', g, 'prio')
redis.call('HDEL', g, 'blocked', 'token')
redis.call('SREM', BLOCKED, gid)
if ARGV[3] == '1' then
  bury(gid, prio, ARGV[4], now)
  release(gid, prio, now)
else
  local head = redis.call('LINDEX', qkey(gid), 0)
  if head then redis.call('HDEL', ATT, head) end
  redis.call('HSET', g, 'at', fmt(now))
  redis.call('ZADD', rkey(prio), fmt(now), gid)
end
redis.call('PUBLISH', WAKE, '1')
return 1
