-- release. ARGV: now, group id, token, message id. Returns 1, or 0 if not held.
-- Ends the lease without counting the delivery (attempts - 1, never below 0); the group is
-- claimable at once. The message's last error stays.
check_layout()
local now = clock(ARGV[1])
local gid, token, mid = ARGV[2], ARGV[3], ARGV[4]
if not held(gid, token, mid) then return 0 end
local prio = redis.call('HGET', gkey(gid), 'prio')
local attempts = tonumber(redis.call('HGET', ATT, mid) or '0') or 0
if attempts > 1 then
  redis.call('HSET', ATT, mid, attempts - 1)
else
  redis.call('HDEL', ATT, mid)
end
end_lease(gid)
if set_until(gid, prio, fmt(now)) then redis.call('PUBLISH', WAKE, '1') end
return 1
