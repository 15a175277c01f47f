-- dead_letter. ARGV: now, group id, token, message id, reason, error (JSON up to its time,
-- "" = none), error time ("" = now). Returns 1, or 0 if not held.
-- The dead letter keeps the error given, else the message's last recorded error.
-- needs: clock, store, leases
check_layout()
local now = clock(ARGV[1])
local ok = dead_letter_lease(ARGV[2], ARGV[3], ARGV[4], ARGV[5],
  error_record(ARGV[6], ARGV[7], now), now)
return ok and 1 or 0
