-- release. ARGV: now, group id, token, message id. Returns 1, or 0 if not held.
-- Ends the lease without counting the delivery (attempts - 1, never below 0); the group is
-- claimable at once. The message's last error stays.
-- needs: clock, store, wakeups, leases
check_layout()
local now = clock(ARGV[1])
local ok, wake = release_lease(ARGV[2], ARGV[3], ARGV[4], now)
if wake then announce() end
return ok and 1 or 0
