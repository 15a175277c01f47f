-- Helpers prepended to every pgque operation script (see pgque/redis/_scripts.py).
--
-- KEYS[1] is the queue's key prefix, "{pgque:<queue>}:". Every key a script touches starts
-- with it, so all of them hash to the one Redis Cluster slot of the queue's hash tag.
-- ARGV[1] is "now" as epoch seconds, or "" to read the server's clock (TIME).
--
-- Key layout 2 under the prefix P (layout 1 kept a group's messages in a list):
--   P.."layout"       string "2": the layout of the data now in the queue
--   P.."seq"          INCR counter of message ids
--   P.."dseq"         INCR counter of dead-letter ids
--   P.."msg"          hash  message id -> event JSON
--   P.."att"          hash  message id -> deliveries that counted (absent = 0)
--   P.."err"          hash  message id -> its last recorded error (ErrorInfo JSON)
--   P.."enq"          zset  message id, scored by enqueue time (oldest_age_s)
--   P.."q:"..gid      zset  the group's message ids, each scored by itself: the lowest id is
--                           the head, and a redriven id goes back into its place
--   P.."g:"..gid      hash  prio; token, mid (the leased message id) and holder while a lease
--                           is out; blocked / paused ("1" while so); at (the group's ready-set
--                           score, kept so a lost entry can be put back)
--   P.."groups"       zset  every group id, score 0 (byte order, for groups())
--   P.."r"..prio      zset  ready set of tier prio: member gid, score COALESCE(until, 0)
--   P.."blocked"      zset  blocked groups that are not paused, score 0
--   P.."paused"       zset  paused groups, score 0
--   P.."dead"         zset  dead-letter ids scored by themselves (id order)
--   P.."d:"..did      hash  one dead letter: g, m, b, p, a, r, t, and e (its error) if any
-- and the pub/sub channel P.."wake": a message there tells idle workers to claim now.
--
-- A group exists while its hash does; it is then in P.."groups" and in exactly one of its
-- tier's ready set (it has messages, neither blocked nor paused), P.."blocked" or P.."paused".
-- A group without messages exists only while paused.
local P = KEYS[1]
local SEQ = P .. 'seq'
local DSEQ = P .. 'dseq'
local MSG = P .. 'msg'
local ATT = P .. 'att'
local ERR = P .. 'err'
local ENQ = P .. 'enq'
local GROUPS = P .. 'groups'
local BLOCKED = P .. 'blocked'
local PAUSED = P .. 'paused'
local DEAD = P .. 'dead'
local WAKE = P .. 'wake'
local LAYOUT_KEY = P .. 'layout'
local LAYOUT = '2'

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

-- Stop (before any write) when the queue's messages were written in another key layout: an
-- older pgque's data must be drained by that pgque, or purged, before this one serves it.
local layout_seen = nil
local function check_layout()
  if layout_seen then return end
  local v = redis.call('GET', LAYOUT_KEY)
  if v ~= LAYOUT and (v or redis.call('EXISTS', ENQ) == 1) then
    return error(redis.error_reply('pgque: the queue at ' .. P .. ' holds messages in key layout '
      .. (v or '1') .. ', and this pgque uses layout ' .. LAYOUT
      .. ': drain the queue with the pgque that wrote it, or purge it'))
  end
  layout_seen = v or 'none'
end

-- Record the layout of the messages a script writes (once per script run).
local function mark_layout()
  check_layout()
  if layout_seen ~= LAYOUT then
    redis.call('SET', LAYOUT_KEY, LAYOUT)
    layout_seen = LAYOUT
  end
end

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
local function enter_group(gid, prio, now, set_prio)
  local g, q = gkey(gid), qkey(gid)
  local cur = redis.call('HMGET', g, 'prio', 'blocked', 'at', 'token', 'paused')
  if cur[1] and redis.call('EXISTS', q) == 0 then
    if cur[5] == '1' then
      if set_prio then redis.call('HSET', g, 'prio', prio) end
      return
    end
    redis.call('DEL', g)
    redis.call('ZREM', rkey(cur[1]), gid)
    redis.call('ZREM', BLOCKED, gid)
    cur = {}
  end
  if not cur[1] then
    local p, at = prio, '0'
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
      redis.call('ZADD', rkey(p), 'NX', at, gid)
    end
  elseif cur[2] ~= '1' and cur[5] ~= '1' and (cur[3] or not cur[4]) then
    redis.call('ZADD', rkey(cur[1]), 'NX', cur[3] or fmt(now), gid)
  end
end

-- Put message id (with its event) into gid, in its place by id.
local function add_message(gid, id, body, now)
  redis.call('ZADD', qkey(gid), id, id)
  redis.call('HSET', MSG, id, body)
  redis.call('ZADD', ENQ, fmt(now), id)
  redis.call('ZADD', GROUPS, 0, gid)
end

-- Append body to gid (a new message id, so it goes last) and return its id.
local function publish_one(gid, body, prio, now)
  check_layout()
  local id = redis.call('INCR', SEQ)
  mark_layout()
  enter_group(gid, prio, now, true)
  add_message(gid, id, body, now)
  return id
end

local function forget_message(id)
  redis.call('HDEL', MSG, id)
  redis.call('HDEL', ATT, id)
  redis.call('HDEL', ERR, id)
  redis.call('ZREM', ENQ, id)
end

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

-- Move message mid of gid to the dead letters; it keeps err, else the message's last error.
local function bury(gid, prio, mid, reason, err, now)
  if redis.call('ZREM', qkey(gid), mid) == 0 then return end
  local body = redis.call('HGET', MSG, mid) or ''
  local att = redis.call('HGET', ATT, mid) or '0'
  local e = err or redis.call('HGET', ERR, mid)
  forget_message(mid)
  local did = redis.call('INCR', DSEQ)
  redis.call('HSET', dkey(did), 'g', gid, 'm', mid, 'b', body, 'p', prio, 'a', att,
    'r', reason, 't', fmt(now))
  if e then redis.call('HSET', dkey(did), 'e', e) end
  redis.call('ZADD', DEAD, did, did)
end

-- End gid's lease (if any).
local function end_lease(gid)
  redis.call('HDEL', gkey(gid), 'token', 'mid', 'holder')
end

-- Move gid's ready-set score to at (a string); the group enters its tier's ready set unless
-- it is paused or blocked. Returns whether it is listed there.
local function set_until(gid, prio, at)
  local g = gkey(gid)
  redis.call('HSET', g, 'at', at)
  local flags = redis.call('HMGET', g, 'paused', 'blocked')
  if flags[1] == '1' or flags[2] == '1' then return false end
  redis.call('ZADD', rkey(prio), at, gid)
  return true
end

-- Free gid after its leased message left it (claimable again from untilv); drop the group
-- when it has no messages left, unless it is paused (an operator's hold outlives its messages).
local function settle(gid, prio, untilv)
  end_lease(gid)
  if redis.call('EXISTS', qkey(gid)) == 0
      and redis.call('HGET', gkey(gid), 'paused') ~= '1' then
    redis.call('DEL', gkey(gid))
    redis.call('ZREM', rkey(prio), gid)
    redis.call('ZREM', BLOCKED, gid)
    redis.call('ZREM', GROUPS, gid)
    return
  end
  set_until(gid, prio, fmt(untilv))
end

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

local GROUP_FIELDS = {'prio', 'token', 'at', 'holder', 'blocked', 'paused'}

-- Everything about gid (its hash fields h) as 11 strings: group id, state, depth, priority,
-- head message id, head enqueue time, head attempts, lease expiry, lease holder, resume time,
-- head's last error; "" for none.
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
    att, expires, holder, resume, err}
end
