-- purge. ARGV: now (unused), budget (how much one call may delete: groups, messages, dead
-- letters and scheduled messages, one unit each).
-- needs: messages, fairness, history
-- Deletes every message, group, dead letter, scheduled message, tick record, fairness key's
-- history and job history record of the queue (key policies and the job history's setting
-- stay). The id counters stay, so message ids keep growing.
-- It also empties a queue written in an older key layout (no layout check).
--
-- A call deletes at most about budget items and returns 0 while more are left; the caller calls
-- again until it returns 1. A script blocks Redis while it runs, and one pass over a queue of a
-- million groups ran past Redis's script time limit (every other client was then answered
-- BUSY); a budget keeps each call short. Between two calls the queue is whole: scheduled
-- messages go first (so none joins a group meanwhile), then each group with its messages and
-- every index entry it has (as when an ack drains it: its key's indexes included), then the
-- dead letters; a group deeper than what is left of the budget loses its first messages and
-- keeps the rest, still a FIFO, for the next call. What is published meanwhile is purged too if
-- a later call finds it. The last call, which finds nothing left in any index, deletes the
-- queue-wide keys, the fairness keys' history among them.
local budget = math.max(1, tonumber(ARGV[2]) or 1)
local spent = 0

-- Up to n members of an index: a sorted set by rank; a set (layout 1) whole.
local function members(key, n)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'zset' then return redis.call('ZRANGE', key, 0, n - 1) end
  if kind == 'set' then return redis.call('SMEMBERS', key) end
  return {}
end

-- Delete gid's messages as far as the budget goes, then, if none is left, the group and its
-- entries in every index (any tier's ready set, whatever its hash says). True if it is gone.
local function purge_group(gid)
  local q = qkey(gid)
  if redis.call('TYPE', q)['ok'] == 'zset' then
    local ids = redis.call('ZRANGE', q, 0, math.max(1, budget - spent) - 1)
    for _, id in ipairs(ids) do forget_message(id) end
    if #ids > 0 then redis.call('ZREMRANGEBYRANK', q, 0, #ids - 1) end  -- the ids just read
    spent = spent + #ids
    if redis.call('EXISTS', q) == 1 then
      refresh_head(gid)
      return false
    end
  else
    redis.call('DEL', q)  -- layout 1: a list; its message records go with the queue-wide keys
  end
  local fk = redis.call('HGET', gkey(gid), 'fk') or ''
  redis.call('DEL', gkey(gid), sqkey(gid))
  for prio = 0, 4 do redis.call('ZREM', rkey(prio), gid) end
  redis.call('ZREM', LEASED, gid)
  redis.call('ZREM', WAITING, gid)
  for _, index in ipairs({GROUPS, BLOCKED, PAUSED, HEADS}) do
    if redis.call('TYPE', index)['ok'] == 'set' then
      redis.call('SREM', index, gid)
    else
      redis.call('ZREM', index, gid)
    end
  end
  key_leave(gid, fk)
  spent = spent + 1
  return true
end

-- Scheduled messages first: none of them joins a group between two calls.
for _, key in ipairs(redis.call('ZRANGE', SCHED, 0, budget - 1)) do
  local gid = redis.call('HGET', skey(key), 'g')
  if gid then redis.call('ZREM', sqkey(gid), key) end
  redis.call('DEL', skey(key))
  redis.call('ZREM', SCHED, key)
  redis.call('ZREM', SIDS, key)
  spent = spent + 1
end
if spent >= budget then return 0 end

local index = {GROUPS, BLOCKED, PAUSED}
for prio = 0, 4 do index[#index + 1] = rkey(prio) end
for _, key in ipairs(index) do
  while true do
    local gids = members(key, budget - spent)
    if #gids == 0 then break end
    for _, gid in ipairs(gids) do
      if not purge_group(gid) or spent >= budget then return 0 end
    end
  end
end

-- (Every group loop above returned once the budget was spent: some of it is left here.)
for _, did in ipairs(redis.call('ZRANGE', DEAD, 0, budget - spent - 1)) do
  redis.call('DEL', dkey(did))
  redis.call('ZREM', DEAD, did)
  spent = spent + 1
end
if redis.call('ZCARD', DEAD) > 0 then return 0 end

-- The job history's records go, what is left of the budget a call, with the hours of the
-- message index they were listed in.
local entries = redis.call('XRANGE', HLOG, '-', '+', 'COUNT', math.max(1, budget - spent))
if #entries > 0 then
  local hours = {}
  for _, entry in ipairs(entries) do
    local ms = tonumber(string.match(entry[1], '^(%d+)-'))
    local hour = math.floor(ms / 1000 / HISTORY_INDEX_SPAN)
    if not hours[hour] then
      hours[hour] = true
      redis.call('DEL', hmkey(hour))
    end
    redis.call('XDEL', HLOG, entry[1])
  end
  if redis.call('XLEN', HLOG) > 0 then return 0 end
end

-- Nothing is left in any index: the queue-wide keys go. The fairness keys' indexes, finish
-- tags, buckets and virtual clock go (shares start level again); their policies
-- (configuration) stay, and a key with a policy stays listed. (The keys' indexes are empty
-- by now unless something outside pgque wrote them.)
for _, keys in ipairs({KALL, KQ}) do
  for _, fk in ipairs(redis.call('ZRANGE', keys, 0, -1)) do
    redis.call('DEL', krkey(fk), kgkey(fk), klkey(fk))
  end
end
redis.call('DEL', KALL, KQ, KF, KB, KV)
for _, fk in ipairs(redis.call('HKEYS', KP)) do
  if fk ~= DEFAULT_POLICY then redis.call('ZADD', KALL, 0, fk) end
end
redis.call('DEL', DEAD, MSG, ATT, ERR, ENQ, MG, LAYOUT_KEY, SCHED, SIDS, TICKS, HEADS, HEADS_OK,
  HEADS_AT, HLOG, LEASED, WAITING)
return 1
