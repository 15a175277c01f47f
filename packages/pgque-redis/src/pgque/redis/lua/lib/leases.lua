-- leases: the fence of a lease, and its four settlements.
-- needs: clock, messages, history, groups, enqueue, dead_letters

-- A lease is held iff its token is the group's token, it was granted on message mid, and that
-- message is still in the group (wherever it now stands: a redrive may put lower ids ahead).
local function held(gid, token, mid)
  local cur = redis.call('HMGET', gkey(gid), 'token', 'mid')
  if not cur[1] or cur[1] ~= token or cur[2] ~= mid then return false end
  return redis.call('ZSCORE', qkey(gid), mid) ~= false
end

-- The error record a script received as (JSON up to its time, time): the JSON is completed
-- with the given time, or with now when none was given. nil when there is no error.
local function error_record(prefix, at, now)
  if prefix == nil or prefix == '' then return nil end
  if at == nil or at == '' then at = fmt(now) end
  return prefix .. at .. '}'
end

-- The four settlements of a lease (gid, token, mid): ack, nack, release and dead_letter, and
-- of settle_and_claim. Each checks the fence first and, when the lease is not held, returns
-- false and changes nothing; when it is, it records itself in the queue's history (if on)
-- before it changes the message (lib/history.lua).

-- ack: remove the leased message and free its group.
local function ack_lease(gid, token, mid, now)
  if not held(gid, token, mid) then return false end
  -- Due scheduled messages join first (a batch of them), so a group they keep busy is not
  -- dropped and remade.
  join_group_due(gid, now, JOIN_BATCH)
  record_history('acked', gid, mid, now, true)
  local h = redis.call('HMGET', gkey(gid), 'prio', 'fk')
  redis.call('ZREM', qkey(gid), mid)
  forget_message(mid)
  refresh_head(gid)
  -- Round-robin: a served group goes behind every group waiting since before now.
  settle(gid, h[1], now, h[2] or '')
  return true
end

-- nack: the delivery counts; err (a record from error_record, or nil) becomes the message's
-- last error (nil keeps the stored one); the group is claimable again at now + delay (parked
-- while delay > 0). Returns whether the lease was held, and whether to wake idle workers.
local function nack_lease(gid, token, mid, delay, err, now)
  if not held(gid, token, mid) then return false, false end
  local prio = redis.call('HGET', gkey(gid), 'prio')
  record_history('nacked', gid, mid, now, true, err)
  if err then redis.call('HSET', ERR, mid, err) end
  end_lease(gid)
  local listed = set_until(gid, prio, fmt(now + delay))
  return true, delay <= 0 and listed
end

-- release: end the lease without counting the delivery (attempts - 1, never below 0); the
-- group is claimable at once; the message's last error stays. Returns whether the lease was
-- held, and whether to wake idle workers.
local function release_lease(gid, token, mid, now)
  if not held(gid, token, mid) then return false, false end
  local prio = redis.call('HGET', gkey(gid), 'prio')
  record_history('released', gid, mid, now, true)
  local attempts = tonumber(redis.call('HGET', ATT, mid) or '0') or 0
  if attempts > 1 then
    redis.call('HSET', ATT, mid, attempts - 1)
  else
    redis.call('HDEL', ATT, mid)
  end
  end_lease(gid)
  return true, set_until(gid, prio, fmt(now))
end

-- dead_letter: move the leased message to the dead letters with reason; the dead letter
-- keeps err (a record from error_record), else the message's last recorded error.
local function dead_letter_lease(gid, token, mid, reason, err, now)
  if not held(gid, token, mid) then return false end
  join_group_due(gid, now, JOIN_BATCH)
  local prio = redis.call('HGET', gkey(gid), 'prio')
  record_history('dead_lettered', gid, mid, now, true, err, reason)
  bury(gid, prio, mid, reason, err, now)
  settle(gid, prio, now)
  return true
end
