-- ack / ack_many. ARGV: now, then (group id, token, message id) triples.
-- Returns 1 (acked) or 0 (lease not held) per triple.
-- needs: clock, store, leases
check_layout()
local now = clock(ARGV[1])
local out = {}
for i = 2, #ARGV, 3 do
  out[#out + 1] = ack_lease(ARGV[i], ARGV[i + 1], ARGV[i + 2], now) and 1 or 0
end
return out
