-- Helpers prepended to every pgque operation script (see pgque/redis/_scripts.py).
--
-- KEYS[1] is the queue's key prefix, "{pgque:<queue>}:". Every key a script touches starts
-- with it, so all of them hash to the one Redis Cluster slot of the queue's hash tag.
-- ARGV[1] is "now" as epoch seconds, or "" to read the server's clock (TIME).
--
-- Layout under the prefix P:
--   P.."seq"          INCR counter of message ids
--   P.."dseq"         INCR counter of dead-letter ids
--   P.."msg"          hash  message id -> event JSON
--   P.."att"          hash  message id -> delivery attempts (absent = 0)
--   P.."enq"          zset  message id, scored by enqueue time (oldest_age_s)
--   P.."q:"..gid      list  the group's message ids, head first
--   P.."g:"..gid      hash  prio, token (while leased), blocked ("1" while blocked), at (the
--                           group's ready-set score, kept so a lost entry can be put back)
--   P.."r"..prio      zset  ready set of tier prio: member gid, score COALESCE(until, 0)
--   P.."blocked"      set   blocked group ids (they leave the ready sets)
--   P.."dead"         zset  dead-letter ids scored by themselves (id order)
--   P.."d:"..did      hash  one dead letter: g, m, b, p, a, r, t
-- and the pub/sub channel P.."wake": a message there tells idle workers to claim now.
local P = KEYS[1]
local SEQ = P .. 'seq'
local DSEQ = P .. 'dseq'
local MSG = P .. 'msg'
local ATT = P .. 'att'
local ENQ = P .. 'enq'
local BLOCKED = P .. 'blocked'
local DEAD = P .. 'dead'
local WAKE = P .. 'wake'

local function gkey(gid) return P .. 'g:' .. gid end
local function qkey(gid) return P .. 'q:' .. gid end
local function rkey(prio) return P .. 'r' .. prio end
local function dkey(did) return P .. 'd:' .. did end

-- Lua's tostring keeps only 14 significant digits; times need all 17 to round-trip exactly.
local function fmt(x) return string.format('%.17g', x) end

local function clock(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- Append body to gid's tail. A new group enters its tier's ready set as never served (0).
-- An existing group's ready entry is put back if something outside pgque deleted it (eviction,
-- a manual ZREM or DEL), with the score it had: ZADD NX changes no entry that exists, so a
-- healthy group keeps its place, and a leased or parked group stays so until its time. A
-- blocked group is in no ready set on purpose. (A group older than the "at" field is healed at
-- "now" unless leased: its lease's end is unknown.)
local function publish_one(gid, body, prio, now)
  local id = redis.call('INCR', SEQ)
  local g = gkey(gid)
  local cur = redis.call('HMGET', g, 'prio', 'blocked', 'at', 'token')
  if not cur[1] then
    redis.call('HSET', g, 'prio', prio, 'at', 0)
    redis.call('ZADD', rkey(prio), 0, gid)
  elseif cur[2] ~= '1' and (cur[3] or not cur[4]) then
    redis.call('ZADD', rkey(cur[1]), 'NX', cur[3] or fmt(now), gid)
  end
  redis.call('RPUSH', qkey(gid), id)
  redis.call('HSET', MSG, id, body)
  redis.call('ZADD', ENQ, fmt(now), id)
  return id
end

local function forget_message(id)
  redis.call('HDEL', MSG, id)
  redis.call('HDEL', ATT, id)
  redis.call('ZREM', ENQ, id)
end

-- A lease is held iff its token is the group's token and its message is still the head.
local function held(gid, token, mid)
  local cur = redis.call('HGET', gkey(gid), 'token')
  if not cur or cur ~= token then return false end
  return redis.call('LINDEX', qkey(gid), 0) == mid
end

-- Move the head of gid to the dead letters.
local function bury(gid, prio, reason, now)
  local id = redis.call('LPOP', qkey(gid))
  if not id then return end
  local body = redis.call('HGET', MSG, id) or ''
  local att = redis.call('HGET', ATT, id) or '0'
  forget_message(id)
  local did = redis.call('INCR', DSEQ)
  redis.call('HSET', dkey(did), 'g', gid, 'm', id, 'b', body, 'p', prio, 'a', att,
    'r', reason, 't', fmt(now))
  redis.call('ZADD', DEAD, did, did)
end

-- Free gid after its head was settled (claimable again from untilv); drop it when drained.
local function release(gid, prio, untilv)
  if redis.call('LLEN', qkey(gid)) == 0 then
    redis.call('DEL', gkey(gid))
    redis.call('ZREM', rkey(prio), gid)
    redis.call('SREM', BLOCKED, gid)
    return
  end
  local at = fmt(untilv)
  redis.call('HDEL', gkey(gid), 'token')
  redis.call('HSET', gkey(gid), 'at', at)
  redis.call('ZADD', rkey(prio), at, gid)
end
