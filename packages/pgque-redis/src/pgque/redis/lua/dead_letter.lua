-- dead_letter. ARGV: now, group id, token, message id, reason. Returns 1, or 0 if not held.
local now = clock(ARGV[1])
local gid, token, mid = ARGV[2], ARGV[3], ARGV[4]
if not held(gid, token, mid) then return 0 end
local prio = redis.call('HGET', gkey(gid), 'prio')
bury(gid, prio, ARGV[5], now)
release(gid, prio, now)
return 1
