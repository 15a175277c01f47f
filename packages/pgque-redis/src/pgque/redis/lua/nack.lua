-- nack. ARGV: now, group id, token, message id, delay, error (JSON up to its time, "" = none),
-- error time ("" = now). Returns 1, or 0 if not held.
-- The delivery counts; an error becomes the message's last error (none keeps the stored one).
check_layout()
local now = clock(ARGV[1])
local gid, token, mid = ARGV[2], ARGV[3], ARGV[4]
if not held(gid, token, mid) then return 0 end
local prio = redis.call('HGET', gkey(gid), 'prio')
local delay = tonumber(ARGV[5])
local err = error_record(ARGV[6], ARGV[7], now)
if err then redis.call('HSET', ERR, mid, err) end
end_lease(gid)
local listed = set_until(gid, prio, fmt(now + delay))
if delay <= 0 and listed then redis.call('PUBLISH', WAKE, '1') end
return 1
