-- group_info: a group as the group, groups and oldest_groups scripts describe it.

-- A group's state from its hash fields {prio, token, at, holder, blocked, paused}, by the
-- precedence paused > blocked > leased > parked > ready.
local function group_state(h, now)
  if h[6] == '1' then return 'paused' end
  if h[5] == '1' then return 'blocked' end
  if (tonumber(h[3] or '0') or 0) > now then
    if h[2] then return 'leased' end
    return 'parked'
  end
  return 'ready'
end

local GROUP_FIELDS = {'prio', 'token', 'at', 'holder', 'blocked', 'paused', 'fk'}

-- Everything about gid (its hash fields h) as 12 strings: group id, state, depth, priority,
-- head message id, head enqueue time, head attempts, lease expiry, lease holder, resume time,
-- head's last error, fairness key; "" for none (the default key too).
local function group_info(gid, h, now)
  local q = qkey(gid)
  local head = redis.call('ZRANGE', q, 0, 0)[1]
  local enq, att, err = '', '0', ''
  if head then
    enq = redis.call('ZSCORE', ENQ, head) or ''
    att = redis.call('HGET', ATT, head) or '0'
    err = redis.call('HGET', ERR, head) or ''
  end
  local expires, holder, resume = '', '', ''
  if h[2] then
    expires, holder = h[3] or '', h[4] or ''
  elseif (tonumber(h[3] or '0') or 0) > now then
    resume = h[3]
  end
  return {gid, group_state(h, now), tostring(redis.call('ZCARD', q)), h[1], head or '', enq,
    att, expires, holder, resume, err, h[7] or ''}
end
