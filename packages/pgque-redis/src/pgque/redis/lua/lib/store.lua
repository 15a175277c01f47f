-- store: what a queue's keys on this node say of themselves: that the queue lives here (its
-- meta key, whose value names the store) and the key layout its data is written in.
-- needs: refusals, clock

-- The layout a script writes: 5 (see keys.lua). Layouts 2 and 3 (written by an older pgque,
-- whose groups all belong to the default key) are served after their groups are indexed under
-- the default key once (index_layout_3), and layout 4 after its leased and parked groups are
-- indexed for stats once (index_layout_4); any other refuses the queue. A pgque of layout 2
-- or 3 refuses a queue of layout 4 or 5: it would not keep the fairness keys' indexes; one of
-- layout 4 refuses layout 5: it would not keep P.."rl" and P.."rp".
local LAYOUT = '5'
local LAYOUTS_INDEXED = {['2'] = true, ['3'] = true, ['4'] = true}

-- Mark the queue as existing on this node (every write that creates data calls it). The meta
-- key's value, written once, is the queue's store identity (Lease.origin): the server's time
-- of the queue's first write on this server and database ("1" for a queue written by a pgque
-- before it), so a lease of the same queue name on another server or database is told apart.
local meta_seen = KNOWN  -- see refusals.lua: a transport that wrote before finds it there
local function touch_meta()
  if not meta_seen then
    local t = redis.call('TIME')
    redis.call('SET', META, t[1] .. '.' .. t[2], 'NX')
    meta_seen = true
  end
end

-- Index a queue written in layout 2 or 3 for layout 4, in this one script: every group goes
-- under the default key "" (P.."kg:", its ready entry copied to P.."kr:", its lease to
-- P.."kl:"). Its cost is one pass over the queue's groups, once.
local function index_layout_3()
  local ids = redis.call('ZRANGE', GROUPS, 0, -1)
  for _, gid in ipairs(ids) do
    local h = redis.call('HMGET', gkey(gid), 'prio', 'token', 'at')
    if h[1] then
      redis.call('ZADD', kgkey(''), 0, gid)
      local score = redis.call('ZSCORE', rkey(h[1]), gid)
      if score then redis.call('ZADD', krkey(''), score, gid) end
      if h[2] and h[3] then redis.call('ZADD', klkey(''), h[3], gid) end
    end
  end
  if #ids > 0 then
    redis.call('ZADD', KQ, 'NX', 0, '')
    redis.call('ZADD', KALL, 0, '')
  end
end

-- Index a queue written in layout 4 (or 2 or 3, after index_layout_3) for layout 5, in this
-- one script: each group of a ready set whose score lies after the script's now goes into
-- P.."rl" if it holds a lease, else into P.."rp" (as lib/fairness.lua's timed_entry keeps
-- them). Its cost is one pass over the leased and parked groups, once.
local function index_layout_4()
  local later = '(' .. fmt(clock(ARGV[1]))
  for prio = 0, 4 do
    local entries = redis.call('ZRANGEBYSCORE', rkey(prio), later, '+inf', 'WITHSCORES')
    for i = 1, #entries, 2 do
      local gid = entries[i]
      local index = WAITING
      if redis.call('HEXISTS', gkey(gid), 'token') == 1 then index = LEASED end
      redis.call('ZADD', index, entries[i + 1], gid)
    end
  end
  redis.call('SET', LAYOUT_KEY, LAYOUT)
end

-- Stop (before any write) when the queue's messages were written in a layout this pgque does
-- not serve: an older pgque's data must be drained by that pgque, or purged, before this one
-- serves it. A queue of layout 2 or 3 is indexed for layout 4 first.
local layout_seen = nil
local function check_layout()
  if layout_seen then return end
  local v = redis.call('GET', LAYOUT_KEY)
  if v and LAYOUTS_INDEXED[v] then
    if v ~= '4' then index_layout_3() end
    index_layout_4()
    v = LAYOUT
  end
  if not (v == LAYOUT) and (v or redis.call('EXISTS', ENQ) == 1) then
    refuse('key layout', 'the queue at ' .. P .. ' holds messages in key layout '
      .. (v or '1') .. ', and this pgque reads layouts 2, 3, 4 and 5'
      .. ': drain the queue with the pgque that wrote it, or purge it')
  end
  layout_seen = v or 'none'
end

-- Record the layout of the messages a script writes (once per script run).
local function mark_layout()
  check_layout()
  touch_meta()
  if layout_seen ~= LAYOUT then
    -- A queue written for the first time (or purged) holds no group yet: P.."heads" is
    -- complete from its first message on.
    if layout_seen == 'none' then redis.call('SET', HEADS_OK, '1') end
    redis.call('SET', LAYOUT_KEY, LAYOUT)
    layout_seen = LAYOUT
  end
end
