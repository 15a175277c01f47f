-- groups: a group's hash, and the ready set, blocked or paused index that lists it (see the
-- invariant at the end of keys.lua's key layout).
-- needs: clock, fairness

-- Make gid ready to take a message. A new group enters the ready set of tier prio as never
-- served (0); with set_prio a paused group without messages takes prio. An existing group's
-- ready entry is put back if something outside pgque deleted it (eviction, a manual ZREM or
-- DEL), with the score it had: ZADD NX changes no entry that exists, so a healthy group keeps
-- its place, and a leased or parked group stays so until its time. A blocked or paused group
-- is in no ready set on purpose. (A group older than the "at" field is healed at "now" unless
-- leased: its lease's end is unknown.) A group whose hash vanished while its messages stayed
-- takes back the tier and score of its ready entry (or its blocked or paused mark); ZADD NX
-- again, so a live lease's score is never overwritten (its token is lost: that holder is
-- fenced out, and the message comes back when the lease's time is over). A hash left without
-- messages (they vanished outside pgque) starts afresh unless paused.
local function enter_group(gid, prio, now, set_prio, fk)
  fk = fk or ''
  local g, q = gkey(gid), qkey(gid)
  local cur = redis.call('HMGET', g, 'prio', 'blocked', 'at', 'token', 'paused', 'fk')
  if cur[1] and redis.call('EXISTS', q) == 0 then
    local old = cur[6] or ''
    if cur[5] == '1' then
      if set_prio then
        -- A paused group without messages takes the publish's priority and key.
        redis.call('HSET', g, 'prio', prio)
        if old ~= fk then
          key_leave(gid, old)
          key_join(gid, fk)
          if fk == '' then redis.call('HDEL', g, 'fk') else redis.call('HSET', g, 'fk', fk) end
        end
      end
      return
    end
    redis.call('DEL', g)
    ready_remove(gid, cur[1], old)
    redis.call('ZREM', BLOCKED, gid)
    redis.call('ZREM', HEADS, gid)
    key_leave(gid, old)
    cur = {}
  end
  if not cur[1] then
    local p, at = prio, '0'
    if fk ~= '' then redis.call('HSET', g, 'fk', fk) end
    key_join(gid, fk)
    if redis.call('ZSCORE', PAUSED, gid) then
      redis.call('HSET', g, 'prio', prio, 'paused', '1', 'at', '0')
      p = nil
    elseif redis.call('EXISTS', q) == 1 then
      if redis.call('ZSCORE', BLOCKED, gid) then
        redis.call('HSET', g, 'prio', prio, 'blocked', '1')
        p = nil
      else
        for t = 0, 4 do
          local s = redis.call('ZSCORE', rkey(t), gid)
          if s then
            p, at = t, s
            break
          end
        end
      end
    end
    if p then
      redis.call('HSET', g, 'prio', p, 'at', at)
      ready_add(gid, p, fk, at, true)
    end
  elseif cur[2] ~= '1' and cur[5] ~= '1' and (cur[3] or not cur[4]) then
    ready_add(gid, cur[1], cur[6] or '', cur[3] or fmt(now), true)
  end
end

-- End gid's lease (if any): it no longer holds a slot of its key (fk, read when nil).
local function end_lease(gid, fk)
  redis.call('ZREM', klkey(fk or group_fk(gid)), gid)
  redis.call('HDEL', gkey(gid), 'token', 'mid', 'holder', 'ls')
end

-- Move gid's ready-set score to at (a string); the group enters its tier's ready set unless
-- it is paused or blocked. Returns whether it is listed there.
local function set_until(gid, prio, at)
  local g = gkey(gid)
  redis.call('HSET', g, 'at', at)
  local flags = redis.call('HMGET', g, 'paused', 'blocked', 'fk')
  if flags[1] == '1' or flags[2] == '1' then return false end
  ready_add(gid, prio, flags[3] or '', at, false)
  return true
end

-- End the retry delay gid waits out: claimable from now. False if it waits for none (no such
-- group, blocked, leased, or claimable already). A paused group stays paused.
local function end_delay(gid, now)
  local g = gkey(gid)
  local f = redis.call('HMGET', g, 'token', 'at', 'blocked', 'prio')
  if f[1] or f[3] == '1' or not f[2] or not f[4] or tonumber(f[2]) <= now then return false end
  set_until(gid, f[4], fmt(now))
  return true
end

-- Free gid after its leased message left it (claimable again from untilv); drop the group
-- when it has no messages left, unless it is paused (an operator's hold outlives its messages).
-- fk is gid's fairness key (read when nil).
local function settle(gid, prio, untilv, fk)
  fk = fk or group_fk(gid)
  end_lease(gid, fk)
  if redis.call('EXISTS', qkey(gid)) == 0
      and redis.call('HGET', gkey(gid), 'paused') ~= '1' then
    redis.call('DEL', gkey(gid))
    ready_remove(gid, prio, fk)
    redis.call('ZREM', BLOCKED, gid)
    redis.call('ZREM', GROUPS, gid)
    redis.call('ZREM', HEADS, gid)
    key_leave(gid, fk)
    return
  end
  set_until(gid, prio, fmt(untilv))
end

-- Whether group id a sorts before b in byte order (code points): the order in which a sorted
-- set lists members of equal score.
local function bytes_less(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return la < lb
end
