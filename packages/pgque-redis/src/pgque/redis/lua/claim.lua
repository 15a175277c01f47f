-- claim / claim_many.
-- ARGV: now, visibility, min_priority, n, max_attempts ("" = unlimited), on_exhausted
-- ("dead_letter" | "block"), reason for exhausted heads, token nonce, holder ("" = none),
-- then the ids of groups to skip untouched (those an earlier round of the same claim_many leased: their leases are
-- the caller's even if they expired meanwhile).
-- Returns 7 strings per lease: group id, message id, event JSON, token, priority, attempt,
-- expires_at.
--
-- Candidates are the claimable groups (score <= now) of tiers >= min_priority, taken in
-- (score, group id) order: each tier's zset yields its own order (equal scores sort by member
-- bytes, i.e. code points), and the tiers are merged here. The ready sets are changed only
-- after the walk, so the walk sees one snapshot and visits a group at most once, even when a
-- lease of visibility 0 leaves it claimable.
local now = clock(ARGV[1])
local nowf = fmt(now)
local vis = tonumber(ARGV[2])
local min_prio = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local max_attempts = tonumber(ARGV[5])
local policy = ARGV[6]
local reason = ARGV[7]
local nonce = ARGV[8]
local holder = ARGV[9]
local skip = {}
for i = 10, #ARGV do skip[ARGV[i]] = true end
check_layout()

local function bytes_less(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return la < lb
end

local cursors = {}
for prio = min_prio, 4 do
  cursors[#cursors + 1] = {prio = prio, key = rkey(prio), buf = {}, pos = 1, off = 0,
    page = n, done = false}
end

local function peek(c)
  if c.pos > #c.buf then
    if c.done then return nil end
    local r = redis.call('ZRANGEBYSCORE', c.key, '-inf', nowf, 'WITHSCORES', 'LIMIT', c.off,
      c.page)
    c.off = c.off + c.page
    c.buf, c.pos = {}, 1
    for i = 1, #r, 2 do c.buf[#c.buf + 1] = {r[i], tonumber(r[i + 1])} end
    if #c.buf < c.page then c.done = true end
    c.page = math.min(c.page * 2, 1024)
    if #c.buf == 0 then return nil end
  end
  return c.buf[c.pos]
end

local pending = {}  -- ready-set changes applied after the walk: {key, score or false, gid}
local leases = {}
local count = 0

while count < n do
  local best, best_c = nil, nil
  for _, c in ipairs(cursors) do
    local e = peek(c)
    if e and (best == nil or e[2] < best[2] or (e[2] == best[2] and bytes_less(e[1], best[1])))
    then
      best, best_c = e, c
    end
  end
  if best == nil then break end
  best_c.pos = best_c.pos + 1
  local gid, prio = best[1], best_c.prio
  local g, q = gkey(gid), qkey(gid)
  local info = redis.call('HMGET', g, 'prio', 'blocked', 'paused')
  local stored_prio = info[1]
  if skip[gid] then
    -- Leased by an earlier round of this call: neither counted again nor buried nor blocked.
  elseif info[3] == '1' then
    -- Paused: a stray entry (a paused group is in no ready set); never claimed.
    pending[#pending + 1] = {best_c.key, false, gid}
  elseif redis.call('EXISTS', q) == 0 then
    -- A stale empty group (its messages vanished outside pgque, e.g. by eviction).
    if stored_prio == tostring(prio) or not stored_prio then
      redis.call('DEL', g)
      redis.call('ZREM', BLOCKED, gid)
      redis.call('ZREM', GROUPS, gid)
    end
    pending[#pending + 1] = {best_c.key, false, gid}
  elseif stored_prio and stored_prio ~= tostring(prio) then
    -- Listed in the wrong tier; the group's own tier entry stays.
    pending[#pending + 1] = {best_c.key, false, gid}
  elseif info[2] == '1' then
    pending[#pending + 1] = {best_c.key, false, gid}
  else
    if not stored_prio then
      -- Its hash vanished (eviction): it takes back this tier, and its place in the index.
      redis.call('HSET', g, 'prio', prio)
      redis.call('ZADD', GROUPS, 0, gid)
    end
    local blocked = false
    local lease = nil
    while true do
      -- The head is the lowest message id (a redriven message goes back into its place).
      local head = redis.call('ZRANGE', q, 0, 0)[1]
      if not head then break end
      local body = redis.call('HGET', MSG, head)
      local attempts = tonumber(redis.call('HGET', ATT, head) or '0')
      if not body and string.match(head, '^%d+$') then
        -- No stored event: the message is gone (a purge that could not find this stranded
        -- group deleted it), not undecodable. Drop the id and go on.
        redis.call('ZREM', q, head)
        forget_message(head)
      elseif not body then
        bury(gid, prio, head, 'undecodable event: the group element is not a message id', nil,
          now)
      elseif not pcall(cjson.decode, body) then
        -- Caught here, so the caller needs no second round for text that is not even JSON.
        bury(gid, prio, head, 'undecodable event: the stored text is not JSON', nil, now)
      elseif max_attempts and attempts >= max_attempts then
        if policy == 'block' then
          redis.call('HSET', g, 'blocked', '1')
          end_lease(gid)
          redis.call('ZADD', BLOCKED, 0, gid)
          pending[#pending + 1] = {best_c.key, false, gid}
          blocked = true
          break
        end
        -- The dead letter keeps the message's last recorded error.
        bury(gid, prio, head, reason, nil, now)
      else
        local attempt = redis.call('HINCRBY', ATT, head, 1)
        count = count + 1
        local token = nonce .. ':' .. count
        local expires = fmt(now + vis)
        redis.call('HSET', g, 'token', token, 'mid', head, 'at', expires)
        if holder ~= '' then
          redis.call('HSET', g, 'holder', holder)
        else
          redis.call('HDEL', g, 'holder')
        end
        pending[#pending + 1] = {best_c.key, expires, gid}
        lease = {gid, head, body, token, tostring(prio),
          tostring(attempt), expires}
        break
      end
    end
    if lease then
      for i = 1, 7 do leases[#leases + 1] = lease[i] end
    elseif not blocked then
      -- Every message was exhausted and dead-lettered: the group is drained (it is not
      -- paused: a paused group is never claimed).
      redis.call('DEL', g)
      redis.call('ZREM', GROUPS, gid)
      pending[#pending + 1] = {best_c.key, false, gid}
    end
  end
end

for _, p in ipairs(pending) do
  if p[2] then
    redis.call('ZADD', p[1], p[2], p[3])
  else
    redis.call('ZREM', p[1], p[3])
  end
end
return leases
