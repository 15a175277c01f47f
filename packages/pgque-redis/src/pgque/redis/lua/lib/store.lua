-- store: what a queue's keys on this node say of themselves: that the queue lives here (its
-- meta key, whose value names the store) and the key layout its data is written in.
-- needs: refusals

-- The layout a script writes: 2 for ordinary messages, 3 once the queue holds scheduled
-- messages or tick records (keys a pgque of layout 2 does not know: it would publish past due
-- messages and purge leaving them, so it must refuse the queue, and it refuses any layout but
-- 2). This pgque serves both; a queue stays 3 until purged.
local LAYOUT = '2'
local LAYOUT_SCHEDULED = '3'
local LAYOUTS_SERVED = {['2'] = true, ['3'] = true}

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
