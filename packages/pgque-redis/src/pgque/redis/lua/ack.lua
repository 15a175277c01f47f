-- ack / ack_many. ARGV: now, then (group id, token, message id) triples.
-- Returns 1 (acked) or 0 (lease not held) per triple.
check_layout()
local now = clock(ARGV[1])
local out = {}
for i = 2, #ARGV, 3 do
  local gid, token, mid = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if held(gid, token, mid) then
    local prio = redis.call('HGET', gkey(gid), 'prio')
    redis.call('ZREM', qkey(gid), mid)
    forget_message(mid)
    -- Round-robin: a served group goes behind every group waiting since before now.
    settle(gid, prio, now)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
