-- messages_page. ARGV: now, group id ("" for the whole queue), kind ("" for every kind), limit,
-- after ("" for the start; else a cursor: a place in the group, or a message id), budget (how
-- many messages this call may examine).
-- Returns next_after ("" when nothing is left), how many messages it examined, then the 12
-- strings of each listed message (see browse_item); or nil (false) when more scheduled
-- messages are due than one call joins (the transport moves them by join_due.lua calls and
-- asks again).
-- With a group id: the group's messages in its order (P.."q:"..gid by place, the cursor a
-- place); without: the queue's in id order (P.."mg", the cursor an id). Only kind's when a
-- kind is given. As pgque.core.browse.page_of, the call stops once limit messages are kept or
-- budget examined, and next_after is then the cursor of the last one examined. The transport
-- calls again from there while its page is short and SCAN_ROWS are not examined yet, so one
-- script never holds Redis for a long scan.
-- needs: clock, store, history, enqueue, browse
check_layout()
local now = clock(ARGV[1])
local gid, kind, limit, budget = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[6])
if gid ~= '' then
  if join_group_due(gid, now, JOIN_BATCH) then return false end
elseif more_due(now) then
  return false
end
local index = gid ~= '' and qkey(gid) or MG
local low = ARGV[5] == '' and '-inf' or '(' .. ARGV[5]
local out = {'', 0}
local examined, kept, last = 0, 0, nil
while true do
  -- Filtered: read ahead in chunks; unfiltered: every message read is kept, so no more than
  -- what fills the page and shows whether one is left.
  local chunk = kind ~= '' and budget - examined + 1 or limit - kept + 1
  local rows = redis.call('ZRANGEBYSCORE', index, low, '+inf', 'WITHSCORES', 'LIMIT', 0, chunk)
  if #rows == 0 then
    out[2] = examined
    return out
  end
  local ids, owners = {}, {}
  for i = 1, #rows, 2 do
    local id, owner = rows[i], gid
    if gid == '' then
      local at = string.find(id, ':', 1, true)
      id, owner = string.sub(id, 1, at - 1), string.sub(id, at + 1)
    end
    ids[#ids + 1], owners[#owners + 1] = id, owner
  end
  local bodies = redis.call('HMGET', MSG, unpack(ids))
  for j, id in ipairs(ids) do
    if kept >= limit or examined >= budget then
      out[1], out[2] = last, examined
      return out
    end
    examined = examined + 1
    last = rows[2 * j]
    local body = bodies[j]
    if body and (kind == '' or event_kind(body) == kind) then
      if group_item(out, id, owners[j], body) then kept = kept + 1 end
    end
  end
  low = '(' .. last
end
