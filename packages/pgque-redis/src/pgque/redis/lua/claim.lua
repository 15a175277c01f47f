-- claim / claim_many.
-- ARGV: now, visibility, min_priority, n, max_attempts ("" = unlimited), on_exhausted
-- ("dead_letter" | "block"), reason for exhausted heads, token nonce, holder ("" = none),
-- then the ids of groups to skip untouched (those an earlier round of the same claim_many
-- leased: their leases are the caller's even if they expired meanwhile).
-- Returns 7 strings per lease: group id, message id, event JSON, token, priority, attempt,
-- expires_at (see claim_heads in lib/claims.lua).
-- needs: clock, claims
local now = clock(ARGV[1])
local skip = {}
for i = 10, #ARGV do skip[ARGV[i]] = true end
return claim_heads(now, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[8], ARGV[9], skip, {})
