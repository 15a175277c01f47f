-- messages_page. ARGV: now, group id ("" for the whole queue), kind ("" for every kind), limit,
-- after ("" for the start; else a cursor: a place in the group, or a message id).
-- Returns next_after ("" when nothing is left), then the 12 strings of each listed message
-- (see browse_item); or nil (false) when more scheduled messages are due than one call joins
-- (the transport moves them by join_due.lua calls and asks again).
-- With a group id: the group's messages in its order (P.."q:"..gid by place, the cursor a
-- place); without: the queue's in id order (P.."mg", the cursor an id). Only kind's when a
-- kind is given. At most SCAN_ROWS messages are examined; as pgque.core.browse.page_of, the
-- call stops once limit messages are kept or SCAN_ROWS examined, and next_after is then the
-- cursor of the last one examined.
-- needs: clock, store, history, enqueue, browse
check_layout()
local now = clock(ARGV[1])
local gid, kind, limit = ARGV[2], ARGV[3], tonumber(ARGV[4])
if gid ~= '' then
  if join_group_due(gid, now, JOIN_BATCH) then return false end
elseif more_due(now) then
  return false
end
local index = gid ~= '' and qkey(gid) or MG
local low = ARGV[5] == '' and '-inf' or '(' .. ARGV[5]
local out = {''}
local examined, kept, last = 0, 0, nil
while true do
  -- Filtered: read ahead in chunks; unfiltered: every message read is kept, so no more than
  -- what fills the page and shows whether one is left.
  local chunk = kind ~= '' and 1000 or limit - kept + 1
  local rows = redis.call('ZRANGEBYSCORE', index, low, '+inf', 'WITHSCORES', 'LIMIT', 0, chunk)
  if #rows == 0 then return out end
  for i = 1, #rows, 2 do
    if kept >= limit or examined >= SCAN_ROWS then
      out[1] = last
      return out
    end
    examined = examined + 1
    last = rows[i + 1]
    local id, owner = rows[i], gid
    if gid == '' then
      local at = string.find(id, ':', 1, true)
      id, owner = string.sub(id, 1, at - 1), string.sub(id, at + 1)
    end
    local body = redis.call('HGET', MSG, id)
    if body and (kind == '' or event_kind(body) == kind) then
      if group_item(out, id, owner, body) then kept = kept + 1 end
    end
  end
  low = '(' .. last
end
