-- unblock. ARGV: now, group id, drop_head ("1"/"0"), reason for a dropped head, the head the
-- caller expects ("" = any). Returns 1, or 0 if the group is not blocked (or its head is not
-- the one expected: then nothing changes). Acts on the head (the message first by place,
-- see P.."q:"..gid in lib/keys.lua); a retried head keeps its last error. A paused group stays
-- paused.
-- needs: clock, store, wakeups, history, groups, enqueue, dead_letters
check_layout()
local now = clock(ARGV[1])
local gid = ARGV[2]
-- A batch of the group's due messages joins first (see join_group_due in lib/enqueue.lua).
join_group_due(gid, now, JOIN_BATCH)
local g = gkey(gid)
if redis.call('HGET', g, 'blocked') ~= '1' then return 0 end
local head = redis.call('ZRANGE', qkey(gid), 0, 0)[1]
if ARGV[5] ~= '' and head ~= ARGV[5] then return 0 end
local prio = redis.call('HGET', g, 'prio')
redis.call('HDEL', g, 'blocked')
end_lease(gid)
redis.call('ZREM', BLOCKED, gid)
if head and ARGV[3] == '1' then
  record_history('dead_lettered', gid, head, now, false, nil, ARGV[4])
  bury(gid, prio, head, ARGV[4], nil, now)
  settle(gid, prio, now)
elseif head then
  redis.call('HDEL', ATT, head)
  set_until(gid, prio, fmt(now))
else
  settle(gid, prio, now)
end
announce()
return 1
