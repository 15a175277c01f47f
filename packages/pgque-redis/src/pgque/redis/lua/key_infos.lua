-- key_infos: fairness keys as keys() and key_info() show them.
-- ARGV: now, mode ("one" | "page"), then for "one" the key; for "page" the limit and the
-- ZRANGEBYLEX bound to start at ("-", or "(" .. the key to start after).
-- Returns now, then 8 strings per listed key: key, "1" if its policy is its own (else "0"),
-- its policy as stored (its own, else the default; "" for none), in-flight groups (live
-- leases), groups with messages, messages, its oldest head's enqueue time ("" for none), and
-- its tokens ("" without a rate). Keys go in byte order (the default key "" first); a key is
-- listed while it has a group with messages or a live lease, or a policy of its own.
-- An empty reply: due scheduled messages are to join first (see more_due).
-- needs: clock, store, fairness, enqueue
check_layout()
local now = clock(ARGV[1])
local nowf = fmt(now)
if more_due(now) then return {} end
local default_text = nil

-- Append fk's 8 strings to out if it is listed; returns whether it was.
local function describe(fk, out)
  local own = redis.call('HGET', KP, fk)
  local in_flight = redis.call('ZCOUNT', klkey(fk), '(' .. nowf, '+inf')
  local groups, messages, oldest = 0, 0, nil
  for _, gid in ipairs(redis.call('ZRANGE', kgkey(fk), 0, -1)) do
    local depth = redis.call('ZCARD', qkey(gid))
    if depth > 0 then
      groups = groups + 1
      messages = messages + depth
      local at = redis.call('ZSCORE', HEADS, gid)
      if not at then
        local head = redis.call('ZRANGE', qkey(gid), 0, 0)[1]
        at = head and redis.call('ZSCORE', ENQ, head)
      end
      at = at and tonumber(at)
      if at and (oldest == nil or at < oldest) then oldest = at end
    end
  end
  if not own and groups == 0 and in_flight == 0 then return false end
  local text = own
  if not text then
    if default_text == nil then default_text = redis.call('HGET', KP, DEFAULT_POLICY) or '' end
    text = default_text
  end
  local pol = parse_policy(text) or NO_POLICY
  local tokens = ''
  if pol.rate then tokens = fmt((tokens_of(fk, pol, now))) end
  out[#out + 1] = fk
  out[#out + 1] = own and '1' or '0'
  out[#out + 1] = text
  out[#out + 1] = tostring(in_flight)
  out[#out + 1] = tostring(groups)
  out[#out + 1] = tostring(messages)
  out[#out + 1] = oldest and fmt(oldest) or ''
  out[#out + 1] = tokens
  return true
end

local out = {nowf}
if ARGV[2] == 'one' then
  describe(ARGV[3], out)
  return out
end
local limit = tonumber(ARGV[3])
local start = ARGV[4]
local count = 0
while count < limit do
  local chunk = math.max(limit - count, 64)
  local names = redis.call('ZRANGEBYLEX', KALL, start, '+', 'LIMIT', 0, chunk)
  for _, fk in ipairs(names) do
    start = '(' .. fk
    if describe(fk, out) then
      count = count + 1
      if count >= limit then break end
    end
  end
  if #names < chunk then break end
end
return out
