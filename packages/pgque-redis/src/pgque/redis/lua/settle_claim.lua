-- settle_and_claim: settle finished leases, then claim, in one script.
-- ARGV: now, then claim.lua's visibility, min_priority, n, max_attempts ("" = unlimited),
-- on_exhausted, reason for exhausted heads, token nonce and holder ("" = none), then 7 strings
-- per settlement: outcome ("ack" | "nack" | "release" | "dead_letter"), group id, token,
-- message id, delay (nack) or reason (dead_letter) or "", error (JSON up to its time, "" =
-- none), error time ("" = now).
-- Returns one integer per settlement, 1 (applied) or 0 (lease not held), then claim.lua's 7
-- strings per lease.
--
-- Each settlement is exactly its own script's (ack.lua, nack.lua, release.lua,
-- dead_letter.lua), applied in order and fenced on its own; a failed fence changes nothing and
-- never stops the others or the claim. Then up to n heads are leased exactly as claim.lua
-- does, by the same now: a group a settlement freed is a candidate like any other.
-- needs: refusals, clock, store, wakeups, leases, claims
check_layout()
local now = clock(ARGV[1])
local first = 10
-- Every outcome is checked before the first write: a script that stops midway keeps its writes.
if (#ARGV - first + 1) % 7 ~= 0 then
  refuse('bad input', 'settle_claim takes 7 arguments per settlement')
end
local ops = {ack = true, nack = true, release = true, dead_letter = true}
for i = first, #ARGV, 7 do
  if not ops[ARGV[i]] or (ARGV[i] == 'nack' and not tonumber(ARGV[i + 4])) then
    refuse('bad input', 'bad settlement ' .. tostring((i - first) / 7 + 1))
  end
end
local out = {}
local wake = false
for i = first, #ARGV, 7 do
  local op, gid, token, mid = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local ok, woke = false, false
  if op == 'ack' then
    ok = ack_lease(gid, token, mid, now)
  elseif op == 'nack' then
    ok, woke = nack_lease(gid, token, mid, tonumber(ARGV[i + 4]),
      error_record(ARGV[i + 5], ARGV[i + 6], now), now)
  elseif op == 'release' then
    ok, woke = release_lease(gid, token, mid, now)
  else
    ok = dead_letter_lease(gid, token, mid, ARGV[i + 4],
      error_record(ARGV[i + 5], ARGV[i + 6], now), now)
  end
  out[#out + 1] = ok and 1 or 0
  wake = wake or woke
end
-- One wake-up for every nack without delay and release that made a group claimable.
if wake then announce() end
local n = tonumber(ARGV[4])
if n > 0 then
  claim_heads(now, tonumber(ARGV[2]), tonumber(ARGV[3]), n, tonumber(ARGV[5]), ARGV[6],
    ARGV[7], ARGV[8], ARGV[9], {}, out)
end
return out
