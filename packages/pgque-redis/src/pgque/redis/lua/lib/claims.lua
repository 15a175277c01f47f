-- claims: leasing the heads of claimable groups (claim, claim_many, settle_and_claim).
-- needs: clock, store, messages, history, fairness, groups, enqueue, dead_letters

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
--
-- Fair shares between keys first (pgque/core/fairness.py): each lease goes to the key of
-- lowest (finish tag, key) among the keys with a claimable group, which is P.."kq"'s order
-- (start = max(finish, clock) orders as finish does), skipping a key at its cap (its live
-- leases, P.."kl:"..fk) or without a whole token; the virtual clock moves to the lease's start
-- and the key's finish tag becomes start + 1 / weight. Within a key, its claimable groups
-- (score <= now) of tiers >= min_priority go in (score, group id) order, P.."kr:"..fk's order
-- (equal scores sort by member bytes: bytes_less). A charged key goes back among the keys
-- at its new finish tag. Ready sets, P.."kq" and the tags change only after the walk, so the
-- walk sees one snapshot and visits a group at most once, even when a lease of visibility 0
-- leaves it claimable.
local function claim_heads(now, vis, min_prio, n, max_attempts, policy, reason, nonce, holder,
    skip, out)
  check_layout()
  join_due(now, JOIN_BATCH)
  local labels = holder_labels(holder)
  local nowf = fmt(now)
  local vclock = tonumber(redis.call('GET', KV) or '0')
  local vclock0 = vclock

  -- The keys of P.."kq" in (finish, key) order, read a page at a time.
  local stream = {buf = {}, pos = 1, off = 0, page = math.min(math.max(n, 8), 1024),
    done = false}
  local function stream_peek()
    if stream.pos > #stream.buf then
      if stream.done then return nil end
      local r = redis.call('ZRANGE', KQ, stream.off, stream.off + stream.page - 1, 'WITHSCORES')
      stream.off = stream.off + stream.page
      stream.buf, stream.pos = {}, 1
      for i = 1, #r, 2 do
        stream.buf[#stream.buf + 1] = {key = r[i], finish = tonumber(r[i + 1])}
      end
      if #stream.buf < stream.page then stream.done = true end
      stream.page = math.min(stream.page * 2, 1024)
      if #stream.buf == 0 then return nil end
    end
    return stream.buf[stream.pos]
  end
  -- Keys charged by this call, in (finish, key) order: they come back at their new tag.
  local again = {}
  local function rank_less(x, y)
    if x.finish ~= y.finish then return x.finish < y.finish end
    return bytes_less(x.key, y.key)
  end

  -- A key's claimable groups (tiers >= min_prio, score <= now), read a page at a time.
  local function next_group(k)
    local c = k.cursor
    while true do
      if c.pos > #c.buf then
        if c.done then return nil end
        local r = redis.call('ZRANGEBYSCORE', c.key, '-inf', nowf, 'LIMIT', c.off, c.page)
        c.off = c.off + c.page
        c.buf, c.pos = r, 1
        if #r < c.page then c.done = true end
        c.page = math.min(c.page * 2, 1024)
        if #r == 0 then return nil end
      end
      local gid = c.buf[c.pos]
      c.pos = c.pos + 1
      if not skip[gid] then
        -- Leased by an earlier round of this call (skip): neither counted again nor buried
        -- nor blocked. Else the group's own hash says whether it is this key's and claimable.
        local info = redis.call('HMGET', gkey(gid), 'prio', 'blocked', 'paused', 'fk')
        local stored_prio = info[1]
        if not stored_prio then
          if redis.call('EXISTS', qkey(gid)) == 0 then
            -- A stale group (its messages and hash vanished outside pgque, e.g. by eviction).
            for t = 0, 4 do redis.call('ZREM', rkey(t), gid) end
            timed_leave(gid)
            redis.call('ZREM', BLOCKED, gid)
            redis.call('ZREM', GROUPS, gid)
            redis.call('ZREM', HEADS, gid)
            redis.call('ZREM', kgkey(k.key), gid)
          end
          -- Its hash vanished while its messages stayed: the next publish heals it (under the
          -- default key); its entry here goes.
          k.pending[#k.pending + 1] = {gid, false}
        elseif (info[4] or '') ~= k.key then
          -- A stray entry: the group is another key's (its own entries stay).
          k.pending[#k.pending + 1] = {gid, false}
        elseif info[3] == '1' or info[2] == '1' then
          -- A stray entry: the group is paused or blocked (in no ready set).
          k.pending[#k.pending + 1] = {gid, false, stored_prio}
        elseif redis.call('EXISTS', qkey(gid)) == 0 then
          -- A stale empty group (its messages vanished outside pgque, e.g. by eviction).
          redis.call('DEL', gkey(gid))
          redis.call('ZREM', rkey(stored_prio), gid)
          timed_leave(gid)
          redis.call('ZREM', BLOCKED, gid)
          redis.call('ZREM', GROUPS, gid)
          redis.call('ZREM', HEADS, gid)
          k.pending[#k.pending + 1] = {gid, false, nil, true}
        elseif tonumber(stored_prio) >= min_prio then
          return gid, tonumber(stored_prio)
        end
      end
    end
  end

  -- Whether key k may take a lease now: under its cap and holding a whole token.
  local function may_claim(k)
    local pol = k.pol
    if pol.cap then
      if k.in_flight == nil then k.in_flight = in_flight_of(k.key, now) end
      if k.in_flight >= pol.cap then return false end
    end
    if pol.rate then
      if k.tokens == nil then k.tokens, k.tokens_at = tokens_of(k.key, pol, now) end
      if k.tokens < 1 then return false end
    end
    return true
  end

  -- A key's first page of groups: its share of n if the keys with ready groups split the
  -- claims evenly (one key: all of n), and one more; later pages double.
  local first_page = math.min(64, math.ceil(n / math.max(1, redis.call('ZCARD', KQ))) + 1)
  local visited = {}  -- every key this walk looked at, with its pending ready-set changes
  local count = 0

  while count < n do
    local s, a = stream_peek(), again[1]
    local k, from_again
    if a and (not s or rank_less(a, s)) then
      k, from_again = a, true
    elseif s then
      k, from_again = s, false
    else
      break
    end
    if not k.pol then
      k.pol = policy_of(k.key)
      k.cursor = {key = krkey(k.key), buf = {}, pos = 1, off = 0, page = first_page,
        done = false}
      k.pending = {}
      visited[#visited + 1] = k
    end
    local gid, prio = nil, nil
    if may_claim(k) then gid, prio = next_group(k) end
    if not gid then
      -- Out for the rest of this call: at its cap, without a token, or no claimable group.
      if from_again then table.remove(again, 1) else stream.pos = stream.pos + 1 end
    else
      local g, q = gkey(gid), qkey(gid)
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
          local why = 'undecodable event: the stored text is not JSON'
          record_history('dead_lettered', gid, head, now, false, nil, why)
          bury(gid, prio, head, why, nil, now)
        elseif max_attempts and attempts >= max_attempts then
          if policy == 'block' then
            redis.call('HSET', g, 'blocked', '1')
            end_lease(gid)
            redis.call('ZADD', BLOCKED, 0, gid)
            k.pending[#k.pending + 1] = {gid, false, prio}
            blocked = true
            break
          end
          -- The dead letter keeps the message's last recorded error.
          join_first()
          record_history('exhausted', gid, head, now, false, nil, reason)
          bury(gid, prio, head, reason, nil, now)
        else
          local attempt = redis.call('HINCRBY', ATT, head, 1)
          count = count + 1
          local token = nonce .. ':' .. count
          local expires = fmt(now + vis)
          redis.call('HSET', g, 'token', token, 'mid', head, 'at', expires, 'ls', nowf)
          local label = holder
          if labels then label = labels[count] or '' end
          if label ~= '' then
            redis.call('HSET', g, 'holder', label)
          else
            redis.call('HDEL', g, 'holder')
          end
          k.pending[#k.pending + 1] = {gid, expires, prio}
          redis.call('ZADD', klkey(k.key), expires, gid)
          lease = {gid, head, body, token, tostring(prio), tostring(attempt), expires}
          break
        end
      end
      if lease then
        for i = 1, 7 do out[#out + 1] = lease[i] end
        -- Charge the key (pgque/core/fairness.py: start_tag, finish_tag, one token) and put
        -- it back among the keys at its new finish tag.
        local start = math.max(k.finish, vclock)
        vclock = math.max(vclock, start)
        k.finish = start + 1.0 / k.pol.w
        if k.pol.rate then k.tokens = k.tokens - 1 end
        if k.in_flight then k.in_flight = k.in_flight + 1 end
        k.charged = true
        if from_again then table.remove(again, 1) else stream.pos = stream.pos + 1 end
        local at = #again + 1
        for i, other in ipairs(again) do
          if rank_less(k, other) then
            at = i
            break
          end
        end
        table.insert(again, at, k)
      elseif not blocked then
        -- Every message was exhausted and dead-lettered: the group is drained (it is not
        -- paused: a paused group is never claimed).
        redis.call('DEL', g)
        redis.call('ZREM', GROUPS, gid)
        k.pending[#k.pending + 1] = {gid, false, prio, true}
      end
    end
  end

  -- The walk is over: the ready sets' changes ({gid, score or false, tier or nil, whether
  -- the group is gone}), each charged key's finish tag and tokens, and the keys left without
  -- a ready group leave P.."kq".
  for _, k in ipairs(visited) do
    local kr = krkey(k.key)
    local listed = false
    for _, p in ipairs(k.pending) do
      if p[2] then
        listed = true
        if p[3] then redis.call('ZADD', rkey(p[3]), p[2], p[1]) end
        timed_entry(p[1], p[2], true)
        redis.call('ZADD', kr, p[2], p[1])
      else
        if p[3] then
          redis.call('ZREM', rkey(p[3]), p[1])
          timed_leave(p[1])
        end
        redis.call('ZREM', kr, p[1])
        if p[4] then key_leave(p[1], k.key) end
      end
    end
    if k.charged then
      -- While the key has ready groups its finish tag lives in P.."kq" (P.."kf" when idle).
      redis.call('ZADD', KQ, 'XX', fmt(k.finish), k.key)
      if k.pol.rate then redis.call('HSET', KB, k.key, fmt(k.tokens) .. ' ' .. fmt(k.tokens_at)) end
    end
    if not listed and redis.call('EXISTS', kr) == 0 then key_idles(k.key) end
  end
  if vclock ~= vclock0 then redis.call('SET', KV, fmt(vclock)) end
  return out
end
