-- dead_letters: moving a message out of its group into the dead letters.
-- needs: clock, messages

-- Move message mid of gid to the dead letters; it keeps err, else the message's last error,
-- and its group's fairness key.
local function bury(gid, prio, mid, reason, err, now)
  local place = redis.call('ZSCORE', qkey(gid), mid)
  if not place then return end
  redis.call('ZREM', qkey(gid), mid)
  local body = redis.call('HGET', MSG, mid) or ''
  local att = redis.call('HGET', ATT, mid) or '0'
  local e = err or redis.call('HGET', ERR, mid)
  local enq = redis.call('ZSCORE', ENQ, mid)
  forget_message(mid)
  local did = redis.call('INCR', DSEQ)
  redis.call('HSET', dkey(did), 'g', gid, 'm', mid, 'b', body, 'p', prio, 'a', att,
    'r', reason, 't', fmt(now))
  if e then redis.call('HSET', dkey(did), 'e', e) end
  if enq then redis.call('HSET', dkey(did), 'q', enq) end
  if place ~= mid then redis.call('HSET', dkey(did), 's', place) end
  local fk = redis.call('HGET', gkey(gid), 'fk')
  if fk then redis.call('HSET', dkey(did), 'k', fk) end
  redis.call('ZADD', DEAD, did, did)
  refresh_head(gid)
end
