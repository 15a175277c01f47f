-- claims: leasing the heads of claimable groups (claim, claim_many, settle_and_claim).
-- needs: clock, store, messages, groups, enqueue, dead_letters

-- A holder argument names every lease, or, holding NUL bytes, lease k with its k-th
-- NUL-separated label (a worker filling several slots at once names each slot).
local function holder_labels(holder)
  if not string.find(holder, '\0', 1, true) then return nil end
  local labels, start = {}, 1
  while true do
    local at = string.find(holder, '\0', start, true)
    if not at then
      labels[#labels + 1] = string.sub(holder, start)
      return labels
    end
    labels[#labels + 1] = string.sub(holder, start, at - 1)
    start = at + 1
  end
end

-- Lease the heads of up to n distinct claimable groups of tiers >= min_prio (claim and
-- claim_many, and the claim half of settle_and_claim). max_attempts (nil = unlimited) and
-- policy ("dead_letter" | "block") apply to exhausted heads, which are dead-lettered with
-- reason; tokens are nonce..":"..k; holder ("" = none) labels each lease (see holder_labels);
-- the groups in skip (a set) are passed over untouched. Appends 7 strings per lease to out
-- (group id, message id, event JSON, token, priority, attempt, expires_at) and returns out.
--
-- Due scheduled messages (up to JOIN_BATCH) join their groups first, and a group's own due
-- ones before the claim takes a message out of it (see join_first).
-- Candidates are the claimable groups (score <= now) of tiers >= min_priority, taken in
-- (score, group id) order: each tier's zset yields its own order (equal scores sort by member
-- bytes: bytes_less), and the tiers are merged here. The ready sets are changed only after
-- the walk, so the walk sees one snapshot and visits a group at most once, even when a lease
-- of visibility 0 leaves it claimable.
local function claim_heads(now, vis, min_prio, n, max_attempts, policy, reason, nonce, holder,
    skip, out)
  check_layout()
  join_due(now, JOIN_BATCH)
  local labels = holder_labels(holder)
  local nowf = fmt(now)
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
        redis.call('ZREM', HEADS, gid)
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
      -- Before this claim takes a message out of the group (a dead letter, a dropped id), the
      -- group's due scheduled messages join it, even those beyond this call's JOIN_BATCH: a
      -- group the claim empties then still holds them (with its priority and round-robin
      -- place) rather than being dropped and remade by them later. They join at its tail, so
      -- the head stays the head.
      local joined = false
      local function join_first()
        if not joined then
          joined = true
          join_group_due(gid, now, JOIN_BATCH)
        end
      end
      while true do
        -- The head is the message first by place: the lowest score, its id or, for one that
        -- was scheduled, the place it took when it joined (a redriven one goes back there).
        local head = redis.call('ZRANGE', q, 0, 0)[1]
        if not head then break end
        local body = redis.call('HGET', MSG, head)
        local attempts = tonumber(redis.call('HGET', ATT, head) or '0')
        if not body and string.match(head, '^%d+$') then
          -- No stored event: the message is gone (a purge that could not find this stranded
          -- group deleted it), not undecodable. Drop the id and go on.
          join_first()
          redis.call('ZREM', q, head)
          forget_message(head)
        elseif not body then
          join_first()
          bury(gid, prio, head, 'undecodable event: the group element is not a message id', nil,
            now)
        elseif not pcall(cjson.decode, body) then
          -- Caught here, so the caller needs no second round for text that is not even JSON.
          join_first()
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
          join_first()
          bury(gid, prio, head, reason, nil, now)
        else
          local attempt = redis.call('HINCRBY', ATT, head, 1)
          count = count + 1
          local token = nonce .. ':' .. count
          local expires = fmt(now + vis)
          redis.call('HSET', g, 'token', token, 'mid', head, 'at', expires)
          local label = holder
          if labels then label = labels[count] or '' end
          if label ~= '' then
            redis.call('HSET', g, 'holder', label)
          else
            redis.call('HDEL', g, 'holder')
          end
          pending[#pending + 1] = {best_c.key, expires, gid}
          lease = {gid, head, body, token, tostring(prio), tostring(attempt), expires}
          break
        end
      end
      if lease then
        for i = 1, 7 do out[#out + 1] = lease[i] end
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
  return out
end
