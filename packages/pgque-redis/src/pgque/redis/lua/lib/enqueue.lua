-- enqueue: how messages enter their groups: appended at the tail now (publish_one), or
-- scheduled (schedule_one) and joining the tail when due.
-- needs: clock, store, wakeups, messages, groups

-- How many due scheduled messages one script moves into their groups at most where order does
-- not need them all (claims, stats, groups, scheduled, and the calls that look at or settle
-- one group): a backlog of due ones is moved by successive calls, oldest due first.
local JOIN_BATCH = 1000

-- Scheduled message key joins its group's tail (it is due): see the key layout in keys.lua. The
-- group is created with the message's priority if it has no hash (a paused one stays paused).
-- gid is the group whose P.."sq:" listed key (nil when the caller read P.."sched"). Returns
-- whether a message joined: false when its hash vanished outside pgque (eviction, a manual
-- DEL), which leaves nothing to deliver, and key is then dropped from every index it can be
-- found in (P.."sq:"..gid only when gid is known; join_group_due drops it there anyway).
local function join_scheduled(key, now, gid)
  local s = skey(key)
  local h = redis.call('HMGET', s, 'g', 'p', 'b', 'd', 'k')
  redis.call('ZREM', SCHED, key)
  redis.call('ZREM', SIDS, key)
  redis.call('DEL', s)
  local owner = h[1] or gid
  if owner then redis.call('ZREM', sqkey(owner), key) end
  if not h[1] then return false end
  local id = sched_id(key)
  mark_layout()
  enter_group(owner, h[2] or '0', now, true, h[5] or '')
  local place = redis.call('INCR', SEQ)
  redis.call('ZADD', qkey(owner), place, id)
  index_message(owner, id)
  redis.call('HSET', MSG, id, h[3] or '')
  redis.call('ZADD', ENQ, h[4] or fmt(now), id)
  redis.call('ZADD', GROUPS, 0, owner)
  refresh_head(owner)
  return true
end

-- Move up to limit of the queue's due scheduled messages into their groups, in (due time, id)
-- order; returns how many moved. Nothing due costs one ZRANGE. Moving any wakes idle workers:
-- a waiter that read the next due time after this call took the message out of P.."sched"
-- would otherwise not know its group became claimable.
local function join_due(now, limit)
  local first = redis.call('ZRANGE', SCHED, 0, 0, 'WITHSCORES')
  if not first[1] or tonumber(first[2]) > now then return 0 end
  local due = redis.call('ZRANGEBYSCORE', SCHED, '-inf', fmt(now), 'LIMIT', 0, limit)
  for _, key in ipairs(due) do join_scheduled(key, now, nil) end
  if #due > 0 then announce() end
  return #due
end

-- Move gid's due scheduled messages into gid, in (due time, id) order: every one of them
-- when limit is nil (every append to the group's tail does this first, so no message lands
-- ahead of a due one), else up to limit (calls that only look at or settle the group: the
-- rest join later, still in order, before any append). Nothing due costs one ZRANGEBYSCORE.
-- Each batch leaves P.."sq:"..gid before it joins, so an entry whose hash vanished outside
-- pgque is dropped rather than read again: every round makes progress. Moving any wakes idle
-- workers. Returns whether due ones are left (only ever true with a limit).
local function join_group_due(gid, now, limit)
  local sq = sqkey(gid)
  local nowf = fmt(now)
  local taken, joined = 0, 0
  while not limit or taken < limit do
    local take = JOIN_BATCH
    if limit then take = math.min(take, limit - taken) end
    local due = redis.call('ZRANGEBYSCORE', sq, '-inf', nowf, 'LIMIT', 0, take)
    if #due == 0 then break end
    if redis.call('ZREM', sq, unpack(due)) == 0 then break end
    for _, key in ipairs(due) do
      if join_scheduled(key, now, gid) then joined = joined + 1 end
    end
    taken = taken + #due
  end
  if joined > 0 then announce() end
  if not limit or taken < limit then return false end
  return redis.call('ZRANGEBYSCORE', sq, '-inf', nowf, 'LIMIT', 0, 1)[1] ~= nil
end

-- Schedule body for gid at due (a new message id; fk its fairness key, "" or nil for none) and
-- return its id.
local function schedule_one(gid, body, prio, now, due, fk)
  check_layout()
  local id = redis.call('INCR', SEQ)
  mark_layout()
  local key = sched_key(id)
  local duef = fmt(due)
  redis.call('HSET', skey(key), 'g', gid, 'p', prio, 'b', body, 't', fmt(now), 'd', duef)
  if fk and fk ~= '' then redis.call('HSET', skey(key), 'k', fk) end
  redis.call('ZADD', SCHED, duef, key)
  redis.call('ZADD', SIDS, id, key)
  redis.call('ZADD', sqkey(gid), duef, key)
  return id
end

-- Append body to gid (a new message id, so it goes last, after the group's due scheduled
-- messages) and return its id. A group without messages takes prio and fk (its fairness key,
-- "" or nil for the default key).
local function publish_one(gid, body, prio, now, fk)
  check_layout()
  join_group_due(gid, now)
  local id = redis.call('INCR', SEQ)
  mark_layout()
  enter_group(gid, prio, now, true, fk)
  add_message(gid, id, body, now)
  return id
end

-- stats, groups and scheduled: move up to JOIN_BATCH due messages in, and tell whether some
-- are still due. They then return an empty reply (scheduled: nil) instead of their answer, and
-- the transport moves the rest by join_due.lua calls (a backlog never holds Redis in one
-- script) and asks again.
local function more_due(now)
  join_due(now, JOIN_BATCH)
  local first = redis.call('ZRANGE', SCHED, 0, 0, 'WITHSCORES')
  return first[1] ~= nil and tonumber(first[2]) <= now
end
