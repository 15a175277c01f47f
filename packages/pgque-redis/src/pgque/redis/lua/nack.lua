-- nack. ARGV: now, group id, token, message id, delay, error (JSON up to its time, "" = none),
-- error time ("" = now). Returns 1, or 0 if not held.
-- The delivery counts; an error becomes the message's last error (none keeps the stored one).
-- needs: clock, store, wakeups, leases
check_layout()
local now = clock(ARGV[1])
local ok, wake = nack_lease(ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]),
  error_record(ARGV[6], ARGV[7], now), now)
if wake then announce() end
return ok and 1 or 0
