-- group. ARGV: now, group id. Returns the group's 12 strings (see group_info), an empty reply
-- when there is no such group, or nil when more of its due messages are to join first.
-- needs: clock, store, group_info, enqueue
check_layout()
local now = clock(ARGV[1])
local gid = ARGV[2]
-- Described as if every due scheduled message of the group had joined: a batch joins now, and
-- when more are due the reply is nil (false) and the transport moves them by join_due.lua
-- calls, then asks again.
if join_group_due(gid, now, JOIN_BATCH) then return false end
local h = redis.call('HMGET', gkey(gid), unpack(GROUP_FIELDS))
if not h[1] then return {} end
return group_info(gid, h, now)
