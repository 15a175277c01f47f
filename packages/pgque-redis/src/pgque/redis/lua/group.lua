-- group. ARGV: now, group id. Returns the group's 11 strings (see group_info), or an empty
-- reply when there is no such group.
check_layout()
local now = clock(ARGV[1])
local gid = ARGV[2]
join_group_due(gid, now)
local h = redis.call('HMGET', gkey(gid), unpack(GROUP_FIELDS))
if not h[1] then return {} end
return group_info(gid, h, now)
