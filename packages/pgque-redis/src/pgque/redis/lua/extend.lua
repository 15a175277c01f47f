-- extend. ARGV: now, group id, token, message id, visibility.
-- Returns the new expiry (a string), or nil if the lease is not held.
-- needs: clock, store, fairness, groups, leases
check_layout()
local now = clock(ARGV[1])
local gid, token, mid = ARGV[2], ARGV[3], ARGV[4]
if not held(gid, token, mid) then return false end
local prio = redis.call('HGET', gkey(gid), 'prio')
local expires = fmt(now + tonumber(ARGV[5]))
set_until(gid, prio, expires)
-- The lease holds its key's slot until its new expiry.
redis.call('ZADD', klkey(group_fk(gid)), expires, gid)
return expires
