-- find_message. ARGV: now, message id. Returns the message's 12 strings (see browse_item): in
-- its group (pending or in flight), found through P.."mg", or scheduled and not due yet (due
-- time set); an empty reply when it is neither (settled, unknown, or stored before P.."mg"
-- existed); nil (false) when more scheduled messages are due than one call joins (the
-- transport moves them by join_due.lua calls and asks again).
-- needs: clock, store, enqueue, browse
check_layout()
local now = clock(ARGV[1])
if more_due(now) then return false end
local id = ARGV[2]
local out = {}
for _, member in ipairs(redis.call('ZRANGEBYSCORE', MG, id, id)) do
  local at = string.find(member, ':', 1, true)
  if string.sub(member, 1, at - 1) == id and group_item(out, id, string.sub(member, at + 1)) then
    return out
  end
end
local h = redis.call('HMGET', skey(sched_key(id)), 'g', 'b', 't', 'd')
if h[1] and h[2] and tonumber(h[4] or '0') > now then
  browse_item(out, id, h[1], h[2], h[3] or '0', false, '0', h[4])
end
return out
