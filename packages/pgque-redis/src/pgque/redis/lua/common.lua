-- Helpers prepended to every pgque operation script (see pgque/redis/_scripts.py).
--
-- KEYS[1] is the queue's meta key, "{pgque:<queue>}:meta" (the prefix P, "{pgque:<queue>}:",
-- followed by "meta"); KEYS[2] its fence, P.."fence", a key that never exists. Every key a
-- script touches starts with P, so all of them hash to the one Redis Cluster slot of the
-- queue's hash tag. Both are declared so that Redis Cluster routes and guards the script:
-- while the queue's slot migrates, a node refuses (TRYAGAIN) a script whose declared keys it
-- holds only in part, and the fence is always missing; so no script runs on either node until
-- the slot is stable again, and a queue is never served half here, half there.
-- ARGV[1] is consumed here (removed, so each operation's ARGV starts at "now"): flags, "k" when
-- the caller knows this queue exists (it wrote to it before: the meta key must be here), "s"
-- to announce wake-ups on the sharded channel (SPUBLISH, Redis 7; Redis Cluster).
-- Then ARGV[1] is "now" as epoch seconds, or "" to read the server's clock (TIME).
--
-- Key layout 2 under the prefix P (layout 1 kept a group's messages in a list), and 3: the
-- same keys, and those of scheduled messages and ticks (P.."sched" to P.."ticks" below):
--   P.."layout"       string "2" or "3": the layout of the data now in the queue
--   P.."seq"          INCR counter of message ids
--   P.."dseq"         INCR counter of dead-letter ids
--   P.."msg"          hash  message id -> event JSON
--   P.."att"          hash  message id -> deliveries that counted (absent = 0)
--   P.."err"          hash  message id -> its last recorded error (ErrorInfo JSON)
--   P.."enq"          zset  message id, scored by enqueue time (oldest_age_s)
--   P.."q:"..gid      zset  the group's message ids, each scored by its place (see below): the
--                           lowest place is the head, and a redriven id goes back into its place
--   P.."g:"..gid      hash  prio; token, mid (the leased message id) and holder while a lease
--                           is out; blocked / paused ("1" while so); at (the group's ready-set
--                           score, kept so a lost entry can be put back)
--   P.."groups"       zset  every group id, score 0 (byte order, for groups())
--   P.."r"..prio      zset  ready set of tier prio: member gid, score COALESCE(until, 0)
--   P.."blocked"      zset  blocked groups that are not paused, score 0
--   P.."paused"       zset  paused groups, score 0
--   P.."dead"         zset  dead-letter ids scored by themselves (id order)
--   P.."d:"..did      hash  one dead letter: g, m, b, p, a, r, t, e (its error) if any, and s
--                           (its place in its group, when that was not its id)
--   P.."sched"        zset  scheduled (delayed) message keys, scored by due time
--   P.."sids"         zset  the same keys, scored by message id (scheduled() pages by id)
--   P.."sq:"..gid     zset  the group's scheduled keys, scored by due time
--   P.."s:"..key      hash  one scheduled message: g (group), p (priority), b (event JSON),
--                           t (publish time), d (due time)
--   P.."ticks"        hash  schedule entry -> its last published tick (publish_tick)
--   P.."heads"        zset  every group holding a message, scored by its head's enqueue time
--                           (oldest_groups); P.."heads:ok" is "1" once it lists every such
--                           group (a queue written before it existed is indexed by
--                           oldest_groups itself, P.."heads:at" its cursor meanwhile)
--   P.."meta"         string, written by the first write (publish, pause, ...) and kept by
--                           purge: a node without it does not hold the queue (see KEYS above);
--                           its value is the queue's store identity (see touch_meta)
-- A scheduled message's key is its id left-padded with zeros to 16 digits, so that keys of
-- equal due time sort by id. At its due time it joins its group's tail: it keeps its id, and
-- its score in P.."q:"..gid is a fresh number of P.."seq" (a place after every message
-- published before it joined, before every one published after), so a group's scores are
-- places, the id for every message that never waited.
-- and the pub/sub channel P.."wake" (sharded on a cluster: it hashes to the queue's slot): a
-- message there tells idle workers to claim now.
--
-- A group exists while its hash does; it is then in P.."groups" and in exactly one of its
-- tier's ready set (it has messages, neither blocked nor paused), P.."blocked" or P.."paused".
-- A group without messages exists only while paused.
local META = KEYS[1]
local P = string.sub(META, 1, #META - #'meta')
local FLAGS = table.remove(ARGV, 1) or ''
local KNOWN = string.find(FLAGS, 'k', 1, true) ~= nil
local SHARDED = string.find(FLAGS, 's', 1, true) ~= nil
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
local SCHED = P .. 'sched'
local SIDS = P .. 'sids'
local TICKS = P .. 'ticks'
local HEADS = P .. 'heads'
local HEADS_OK = P .. 'heads:ok'
local HEADS_AT = P .. 'heads:at'
-- The layout a script writes: 2 for ordinary messages, 3 once the queue holds scheduled
-- messages or tick records (keys a pgque of layout 2 does not know: it would publish past due
-- messages and purge leaving them, so it must refuse the queue, and it refuses any layout but
-- 2). This pgque serves both; a queue stays 3 until purged.
local LAYOUT = '2'
local LAYOUT_SCHEDULED = '3'
local LAYOUTS_SERVED = {['2'] = true, ['3'] = true}

-- Stop the script with a refusal the client turns into a typed error (pgque/redis/_common.py,
-- script_refusal): "pgque: <kind>: <message>", kind one of "slot moving", "key layout", "bad
-- input". Raised as a plain string at level 0 (no position prefix): Redis 7 passes it through,
-- and Redis 6.2's error handler, which cannot take the table of redis.error_reply, wraps it in
-- "Error running script (...): @user_script:N: " before it; the client finds the text in both.
local function refuse(kind, message)
  error('pgque: ' .. kind .. ': ' .. message, 0)
end

-- Refuse (before any write) to serve a queue this node does not hold: the caller wrote to it
-- before, so its meta key must exist. It is missing when the queue's slot moved without its
-- keys (a half-done reshard), or its data was lost (a failover to a replica that had not got
-- it yet, a flush). The message starts with "pgque: slot moving" (the transports raise
-- QueueMoving for it).
if KNOWN and redis.call('EXISTS', META) == 0 then
  refuse('slot moving', 'the queue at ' .. P .. ' has no meta key '
    .. 'on this node, though it was written to before: its slot is moving or its data was '
    .. 'lost; nothing was changed')
end

-- Mark the queue as existing on this node (every write that creates data calls it). The meta
-- key's value, written once, is the queue's store identity (Lease.origin): the server's time
-- of the queue's first write on this server and database ("1" for a queue written by a pgque
-- before it), so a lease of the same queue name on another server or database is told apart.
local meta_seen = KNOWN  -- checked above: a transport that wrote before finds it there
local function touch_meta()
  if not meta_seen then
    local t = redis.call('TIME')
    redis.call('SET', META, t[1] .. '.' .. t[2], 'NX')
    meta_seen = true
  end
end

-- Tell idle workers to claim now: on the queue's sharded channel on a cluster, else PUBLISH.
local function announce()
  if SHARDED then
    redis.call('SPUBLISH', WAKE, '1')
  else
    redis.call('PUBLISH', WAKE, '1')
  end
end

local function gkey(gid) return P .. 'g:' .. gid end
local function qkey(gid) return P .. 'q:' .. gid end
local function rkey(prio) return P .. 'r' .. prio end
local function dkey(did) return P .. 'd:' .. did end
local function skey(key) return P .. 's:' .. key end
local function sqkey(gid) return P .. 'sq:' .. gid end
-- A scheduled message's key: its id (a number or its digits), zero-padded to 16 digits; and
-- back (string work: tostring shows only 14 significant digits).
local function sched_key(id) return string.format('%016d', tonumber(id)) end
local function sched_id(key) return (string.gsub(key, '^0+', '')) end

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
  if not (v and LAYOUTS_SERVED[v]) and (v or redis.call('EXISTS', ENQ) == 1) then
    refuse('key layout', 'the queue at ' .. P .. ' holds messages in key layout '
      .. (v or '1') .. ', and this pgque reads layouts 2 and 3'
      .. ': drain the queue with the pgque that wrote it, or purge it')
  end
  layout_seen = v or 'none'
end

-- Record the layout of the messages a script writes (once per script run): LAYOUT, or
-- LAYOUT_SCHEDULED when given; a queue marked LAYOUT_SCHEDULED keeps that mark.
local function mark_layout(layout)
  check_layout()
  touch_meta()
  layout = layout or LAYOUT
  if layout_seen ~= layout and layout_seen ~= LAYOUT_SCHEDULED then
    -- A queue written for the first time (or purged) holds no group yet: P.."heads" is
    -- complete from its first message on.
    if layout_seen == 'none' then redis.call('SET', HEADS_OK, '1') end
    redis.call('SET', LAYOUT_KEY, layout)
    layout_seen = layout
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
    redis.call('ZREM', HEADS, gid)
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

-- Keep gid's entry in P.."heads" right after its messages changed: scored by the enqueue
-- time of its head (its first message by place), or gone when it holds none.
local function refresh_head(gid)
  local head = redis.call('ZRANGE', qkey(gid), 0, 0)[1]
  local at = head and redis.call('ZSCORE', ENQ, head)
  if at then
    redis.call('ZADD', HEADS, at, gid)
  else
    redis.call('ZREM', HEADS, gid)
  end
end

-- Put message id (with its event) into gid, in its place (its id unless place is given).
local function add_message(gid, id, body, now, place)
  redis.call('ZADD', qkey(gid), place or id, id)
  redis.call('HSET', MSG, id, body)
  redis.call('ZADD', ENQ, fmt(now), id)
  redis.call('ZADD', GROUPS, 0, gid)
  refresh_head(gid)
end

-- How many due scheduled messages one script moves into their groups at most where order does
-- not need them all (claims, stats, groups, scheduled, and the calls that look at or settle
-- one group): a backlog of due ones is moved by successive calls, oldest due first.
local JOIN_BATCH = 1000

-- Scheduled message key joins its group's tail (it is due): see the key layout above. The
-- group is created with the message's priority if it has no hash (a paused one stays paused).
-- gid is the group whose P.."sq:" listed key (nil when the caller read P.."sched"). Returns
-- whether a message joined: false when its hash vanished outside pgque (eviction, a manual
-- DEL), which leaves nothing to deliver, and key is then dropped from every index it can be
-- found in (P.."sq:"..gid only when gid is known; join_group_due drops it there anyway).
local function join_scheduled(key, now, gid)
  local s = skey(key)
  local h = redis.call('HMGET', s, 'g', 'p', 'b', 'd')
  redis.call('ZREM', SCHED, key)
  redis.call('ZREM', SIDS, key)
  redis.call('DEL', s)
  local owner = h[1] or gid
  if owner then redis.call('ZREM', sqkey(owner), key) end
  if not h[1] then return false end
  local id = sched_id(key)
  mark_layout(LAYOUT_SCHEDULED)
  enter_group(owner, h[2] or '0', now, true)
  local place = redis.call('INCR', SEQ)
  redis.call('ZADD', qkey(owner), place, id)
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

-- Schedule body for gid at due (a new message id) and return its id.
local function schedule_one(gid, body, prio, now, due)
  check_layout()
  local id = redis.call('INCR', SEQ)
  mark_layout(LAYOUT_SCHEDULED)
  local key = sched_key(id)
  local duef = fmt(due)
  redis.call('HSET', skey(key), 'g', gid, 'p', prio, 'b', body, 't', fmt(now), 'd', duef)
  redis.call('ZADD', SCHED, duef, key)
  redis.call('ZADD', SIDS, id, key)
  redis.call('ZADD', sqkey(gid), duef, key)
  return id
end

-- Append body to gid (a new message id, so it goes last, after the group's due scheduled
-- messages) and return its id.
local function publish_one(gid, body, prio, now)
  check_layout()
  join_group_due(gid, now)
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
  local place = redis.call('ZSCORE', qkey(gid), mid)
  if not place then return end
  redis.call('ZREM', qkey(gid), mid)
  local body = redis.call('HGET', MSG, mid) or ''
  local att = redis.call('HGET', ATT, mid) or '0'
  local e = err or redis.call('HGET', ERR, mid)
  forget_message(mid)
  local did = redis.call('INCR', DSEQ)
  redis.call('HSET', dkey(did), 'g', gid, 'm', mid, 'b', body, 'p', prio, 'a', att,
    'r', reason, 't', fmt(now))
  if e then redis.call('HSET', dkey(did), 'e', e) end
  if place ~= mid then redis.call('HSET', dkey(did), 's', place) end
  redis.call('ZADD', DEAD, did, did)
  refresh_head(gid)
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
local function settle(gid, prio, untilv)
  end_lease(gid)
  if redis.call('EXISTS', qkey(gid)) == 0
      and redis.call('HGET', gkey(gid), 'paused') ~= '1' then
    redis.call('DEL', gkey(gid))
    redis.call('ZREM', rkey(prio), gid)
    redis.call('ZREM', BLOCKED, gid)
    redis.call('ZREM', GROUPS, gid)
    redis.call('ZREM', HEADS, gid)
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

-- The four settlements of a lease (gid, token, mid): ack, nack, release and dead_letter, and
-- of settle_and_claim. Each checks the fence first and, when the lease is not held, returns
-- false and changes nothing.

-- ack: remove the leased message and free its group.
local function ack_lease(gid, token, mid, now)
  if not held(gid, token, mid) then return false end
  -- Due scheduled messages join first (a batch of them), so a group they keep busy is not
  -- dropped and remade.
  join_group_due(gid, now, JOIN_BATCH)
  local prio = redis.call('HGET', gkey(gid), 'prio')
  redis.call('ZREM', qkey(gid), mid)
  forget_message(mid)
  refresh_head(gid)
  -- Round-robin: a served group goes behind every group waiting since before now.
  settle(gid, prio, now)
  return true
end

-- nack: the delivery counts; err (a record from error_record, or nil) becomes the message's
-- last error (nil keeps the stored one); the group is claimable again at now + delay (parked
-- while delay > 0). Returns whether the lease was held, and whether to wake idle workers.
local function nack_lease(gid, token, mid, delay, err, now)
  if not held(gid, token, mid) then return false, false end
  local prio = redis.call('HGET', gkey(gid), 'prio')
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
  bury(gid, prio, mid, reason, err, now)
  settle(gid, prio, now)
  return true
end

-- Lease the heads of up to n distinct claimable groups of tiers >= min_prio (claim and
-- claim_many, and the claim half of settle_and_claim). max_attempts (nil = unlimited) and
-- policy ("dead_letter" | "block") apply to exhausted heads, which are dead-lettered with
-- reason; tokens are nonce..":"..k; holder ("" = none) labels each lease (see holder_labels);
-- the groups in skip
-- (a set) are passed over untouched. Appends 7 strings per lease to out (group id, message
-- id, event JSON, token, priority, attempt, expires_at) and returns out.
--
-- Due scheduled messages (up to JOIN_BATCH) join their groups first, and a group's own due
-- ones before the claim takes a message out of it (see join_first).
-- Candidates are the claimable groups (score <= now) of tiers >= min_priority, taken in
-- (score, group id) order: each tier's zset yields its own order (equal scores sort by member
-- bytes, i.e. code points), and the tiers are merged here. The ready sets are changed only
-- after the walk, so the walk sees one snapshot and visits a group at most once, even when a
-- lease of visibility 0 leaves it claimable.
local function bytes_less(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return la < lb
end

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

-- stats, groups and scheduled: move up to JOIN_BATCH due messages in, and tell whether some
-- are still due. They then return an empty reply (scheduled: nil) instead of their answer, and
-- the transport moves the rest by join_due.lua calls (a backlog never holds Redis in one
-- script) and asks again.
local function more_due(now)
  join_due(now, JOIN_BATCH)
  local first = redis.call('ZRANGE', SCHED, 0, 0, 'WITHSCORES')
  return first[1] ~= nil and tonumber(first[2]) <= now
end

local function claim_heads(now, vis, min_prio, n, max_attempts, policy, reason, nonce, holder,
    skip, out)
  check_layout()
  join_due(now, JOIN_BATCH)
  local labels = holder_labels(holder)
  local nowf = fmt(now)
  local cursors = {}
  for prio = min_prio, 4 do
    cursors[#cursors + 1] = {prio = prio, key = rkey(prio), buf = {}, pos = 1, off = 0,
      page = n, done = false}
  end

  local function peek(c)
    if c.pos > #c.buf then
      if c.done then return nil end
      local r = redis.call('ZRANGEBYSCORE', c.key, '-inf', nowf, 'WITHSCORES', 'LIMIT', c.off,
        c.page)
      c.off = c.off + c.page
      c.buf, c.pos = {}, 1
      for i = 1, #r, 2 do c.buf[#c.buf + 1] = {r[i], tonumber(r[i + 1])} end
      if #c.buf < c.page then c.done = true end
      c.page = math.min(c.page * 2, 1024)
      if #c.buf == 0 then return nil end
    end
    return c.buf[c.pos]
  end

  local pending = {}  -- ready-set changes applied after the walk: {key, score or false, gid}
  local count = 0

  while count < n do
    local best, best_c = nil, nil
    for _, c in ipairs(cursors) do
      local e = peek(c)
      if e and (best == nil or e[2] < best[2] or (e[2] == best[2] and bytes_less(e[1], best[1])))
      then
        best, best_c = e, c
      end
    end
    if best == nil then break end
    best_c.pos = best_c.pos + 1
    local gid, prio = best[1], best_c.prio
    local g, q = gkey(gid), qkey(gid)
    local info = redis.call('HMGET', g, 'prio', 'blocked', 'paused')
    local stored_prio = info[1]
    if skip[gid] then
      -- Leased by an earlier round of this call: neither counted again nor buried nor blocked.
    elseif info[3] == '1' then
      -- Paused: a stray entry (a paused group is in no ready set); never claimed.
      pending[#pending + 1] = {best_c.key, false, gid}
    elseif redis.call('EXISTS', q) == 0 then
      -- A stale empty group (its messages vanished outside pgque, e.g. by eviction).
      if stored_prio == tostring(prio) or not stored_prio then
        redis.call('DEL', g)
        redis.call('ZREM', BLOCKED, gid)
        redis.call('ZREM', GROUPS, gid)
        redis.call('ZREM', HEADS, gid)
      end
      pending[#pending + 1] = {best_c.key, false, gid}
    elseif stored_prio and stored_prio ~= tostring(prio) then
      -- Listed in the wrong tier; the group's own tier entry stays.
      pending[#pending + 1] = {best_c.key, false, gid}
    elseif info[2] == '1' then
      pending[#pending + 1] = {best_c.key, false, gid}
    else
      if not stored_prio then
        -- Its hash vanished (eviction): it takes back this tier, and its place in the index.
        redis.call('HSET', g, 'prio', prio)
        redis.call('ZADD', GROUPS, 0, gid)
      end
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
          bury(gid, prio, head, 'undecodable event: the stored text is not JSON', nil, now)
        elseif max_attempts and attempts >= max_attempts then
          if policy == 'block' then
            redis.call('HSET', g, 'blocked', '1')
            end_lease(gid)
            redis.call('ZADD', BLOCKED, 0, gid)
            pending[#pending + 1] = {best_c.key, false, gid}
            blocked = true
            break
          end
          -- The dead letter keeps the message's last recorded error.
          join_first()
          bury(gid, prio, head, reason, nil, now)
        else
          local attempt = redis.call('HINCRBY', ATT, head, 1)
          count = count + 1
          local token = nonce .. ':' .. count
          local expires = fmt(now + vis)
          redis.call('HSET', g, 'token', token, 'mid', head, 'at', expires)
          local label = holder
          if labels then label = labels[count] or '' end
          if label ~= '' then
            redis.call('HSET', g, 'holder', label)
          else
            redis.call('HDEL', g, 'holder')
          end
          pending[#pending + 1] = {best_c.key, expires, gid}
          lease = {gid, head, body, token, tostring(prio), tostring(attempt), expires}
          break
        end
      end
      if lease then
        for i = 1, 7 do out[#out + 1] = lease[i] end
      elseif not blocked then
        -- Every message was exhausted and dead-lettered: the group is drained (it is not
        -- paused: a paused group is never claimed).
        redis.call('DEL', g)
        redis.call('ZREM', GROUPS, gid)
        pending[#pending + 1] = {best_c.key, false, gid}
      end
    end
  end

  for _, p in ipairs(pending) do
    if p[2] then
      redis.call('ZADD', p[1], p[2], p[3])
    else
      redis.call('ZREM', p[1], p[3])
    end
  end
  return out
end
