-- retry_now. ARGV: now, group id. Returns 1, or 0 if the group waits out no retry delay.
-- The group's head is claimable at once, its attempt count and last error kept (end_delay in
-- lib/groups.lua); a paused group stays paused.
-- needs: clock, store, wakeups, groups
check_layout()
local now = clock(ARGV[1])
local gid = ARGV[2]
if not end_delay(gid, now) then return 0 end
announce()
return 1
