-- pause. ARGV: now, group id. Returns 1 if the group was not paused and now is, 0 if it was.
-- A paused group leaves its ready set (or the blocked index), so no claim sees it; a lease
-- out finishes normally. A group that does not exist is created paused (priority 0, empty).
-- needs: clock, store, fairness, groups, enqueue
check_layout()
local now = clock(ARGV[1])
local gid = ARGV[2]
-- A batch of the group's due messages joins first (see join_group_due in lib/enqueue.lua).
join_group_due(gid, now, JOIN_BATCH)
local g = gkey(gid)
if redis.call('HGET', g, 'paused') == '1' then return 0 end
touch_meta()
enter_group(gid, 0, now, false)
local prio = redis.call('HGET', g, 'prio')
redis.call('HSET', g, 'paused', '1')
ready_remove(gid, prio, group_fk(gid))
redis.call('ZREM', BLOCKED, gid)
redis.call('ZADD', PAUSED, 0, gid)
redis.call('ZADD', GROUPS, 0, gid)
return 1
