-- fairness: a group's fairness key and the key's indexes (its ready groups, its groups, its
-- leases), the key policies, and the token buckets (docs/fairness.md; the rules are those of
-- pgque/core/fairness.py, computed here with the same formulas).
-- needs: clock

-- The fairness key of gid's hash ("" for the default key).
local function group_fk(gid)
  return redis.call('HGET', gkey(gid), 'fk') or ''
end

-- gid's ready-set entry (at score, a string) in the indexes stats counts by score range:
-- P.."rl" while gid holds a lease, else P.."rp" if score lies after the script's now (the
-- group is parked until then); leased says which (read from gid's hash when nil).
local function timed_entry(gid, score, leased)
  if leased == nil then leased = redis.call('HEXISTS', gkey(gid), 'token') == 1 end
  if leased then
    redis.call('ZADD', LEASED, score, gid)
    redis.call('ZREM', WAITING, gid)
  else
    redis.call('ZREM', LEASED, gid)
    if script_now == nil or tonumber(score) > script_now then
      redis.call('ZADD', WAITING, score, gid)
    else
      redis.call('ZREM', WAITING, gid)
    end
  end
end

-- gid left every ready set: it leaves P.."rl" and P.."rp".
local function timed_leave(gid)
  redis.call('ZREM', LEASED, gid)
  redis.call('ZREM', WAITING, gid)
end

-- gid (of key fk) enters its tier's ready set and its key's at score (a string); with nx an
-- entry there already keeps its score. A key that had no ready group joins P.."kq" at the
-- finish tag of its last claim (P.."kf"). A key with a ready group is in P.."kq" (every
-- script keeps it so), so a group that was in its key's ready set already needs no look.
local function ready_add(gid, prio, fk, score, nx)
  local added
  if nx then
    if redis.call('ZADD', rkey(prio), 'NX', score, gid) == 1 then timed_entry(gid, score) end
    added = redis.call('ZADD', krkey(fk), 'NX', score, gid)
  else
    redis.call('ZADD', rkey(prio), score, gid)
    timed_entry(gid, score)
    added = redis.call('ZADD', krkey(fk), score, gid)
  end
  if added == 1 and not redis.call('ZSCORE', KQ, fk) then
    redis.call('ZADD', KQ, redis.call('HGET', KF, fk) or '0', fk)
  end
end

-- fk leaves P.."kq", its finish tag kept in P.."kf" (where it lives while the key idles).
local function key_idles(fk)
  local finish = redis.call('ZSCORE', KQ, fk)
  if finish then
    redis.call('HSET', KF, fk, finish)
    redis.call('ZREM', KQ, fk)
  end
end

-- A key whose ready set is empty leaves P.."kq" (a claim drops such keys too).
local function key_unready(fk)
  if redis.call('EXISTS', krkey(fk)) == 0 then key_idles(fk) end
end

-- gid (of key fk) leaves its tier's ready set and its key's.
local function ready_remove(gid, prio, fk)
  if prio then redis.call('ZREM', rkey(prio), gid) end
  timed_leave(gid)
  redis.call('ZREM', krkey(fk), gid)
  key_unready(fk)
end

-- gid's group hash takes key fk: it is listed among the key's groups.
local function key_join(gid, fk)
  redis.call('ZADD', kgkey(fk), 0, gid)
  redis.call('ZADD', KALL, 0, fk)
end

-- gid (of key fk) is gone: it leaves the key's indexes; a key with no group left and no policy
-- of its own leaves the listing.
local function key_leave(gid, fk)
  redis.call('ZREM', krkey(fk), gid)
  key_unready(fk)
  redis.call('ZREM', klkey(fk), gid)
  redis.call('ZREM', kgkey(fk), gid)
  if redis.call('EXISTS', kgkey(fk)) == 0 and redis.call('HEXISTS', KP, fk) == 0 then
    redis.call('ZREM', KALL, fk)
  end
end

-- A policy as stored ("<weight> <cap> <rate> <per> <burst>", "-" for none) as a table
-- {w, cap, rate, per, burst}; nil for none.
local function parse_policy(text)
  if not text then return nil end
  local w, c, r, p, b = string.match(text, '^(%S+) (%S+) (%S+) (%S+) (%S+)$')
  if not w then return nil end
  local function num(x)
    if x == '-' then return nil end
    return tonumber(x)
  end
  return {w = tonumber(w), cap = num(c), rate = num(r), per = tonumber(p), burst = num(b)}
end

local NO_POLICY = {w = 1, per = 1}

-- The policy claims obey for fk: its own, else the default, else NO_POLICY (read once per
-- script run; a queue without policies costs one EXISTS).
local any_policy = nil
local policies = {}
local default_policy = nil
local function policy_of(fk)
  if any_policy == nil then any_policy = redis.call('EXISTS', KP) == 1 end
  if not any_policy then return NO_POLICY end
  local found = policies[fk]
  if found == nil then
    found = parse_policy(redis.call('HGET', KP, fk))
    if not found then
      if default_policy == nil then
        default_policy = parse_policy(redis.call('HGET', KP, DEFAULT_POLICY)) or NO_POLICY
      end
      found = default_policy
    end
    policies[fk] = found
  end
  return found
end

-- The token bucket's size under pol (which has a rate): burst, else max(1, ceil(rate)).
local function bucket_size(pol)
  if pol.burst then return pol.burst end
  return math.max(1, math.ceil(pol.rate))
end

-- fk's tokens at now under pol (which has a rate): refill() of pgque/core/fairness.py; and
-- the bucket's time to store with them after a charge: now, or the stored time if later (a
-- claim timed before the last charge refilled nothing, and must not refill it twice).
local function tokens_of(fk, pol, now)
  local size = bucket_size(pol)
  local stored = redis.call('HGET', KB, fk)
  if not stored then return size, now end
  local t, at = string.match(stored, '^(%S+) (%S+)$')
  if not t then return size, now end
  at = tonumber(at)
  return math.min(size, tonumber(t) + math.max(0, now - at) * pol.rate / pol.per),
    math.max(now, at)
end

-- How many of fk's groups are leased at now (live leases; expired entries are dropped).
local function in_flight_of(fk, now)
  local kl = klkey(fk)
  redis.call('ZREMRANGEBYSCORE', kl, '-inf', fmt(now))
  return redis.call('ZCARD', kl)
end
