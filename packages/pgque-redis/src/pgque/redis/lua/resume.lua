-- resume. ARGV: now, group id. Returns 1 if the group was paused, 0 if not (or absent).
-- A group without messages is removed; a blocked one goes back to the blocked index; any
-- other back into its ready set at the score it kept (a lease out or a park runs on).
-- needs: clock, store, wakeups, fairness, enqueue
check_layout()
local now = clock(ARGV[1])
local gid = ARGV[2]
-- A batch of the group's due messages joins first (see join_group_due in lib/enqueue.lua).
join_group_due(gid, now, JOIN_BATCH)
local g = gkey(gid)
local h = redis.call('HMGET', g, 'paused', 'prio', 'blocked', 'at', 'fk')
if h[1] ~= '1' then return 0 end
redis.call('HDEL', g, 'paused')
redis.call('ZREM', PAUSED, gid)
if redis.call('EXISTS', qkey(gid)) == 0 then
  redis.call('DEL', g)
  redis.call('ZREM', GROUPS, gid)
  key_leave(gid, h[5] or '')
elseif h[3] == '1' then
  redis.call('ZADD', BLOCKED, 0, gid)
else
  ready_add(gid, h[2], h[5] or '', h[4] or fmt(now), false)
  announce()
end
return 1
