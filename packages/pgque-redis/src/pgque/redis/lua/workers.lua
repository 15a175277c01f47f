-- workers. ARGV: now, include gone ("1" or "0"), the alive multiple.
-- Returns now, then per worker (the caller orders them; alive only unless include gone: its last
-- heartbeat at most the multiple of its interval before now): id, holder, host, pid, version,
-- concurrency, interval, slots, start, last, the count of its leases, then 4 strings per
-- lease (group id, message id, holder, expiry). Its leases are the unexpired leases whose
-- holder starts with its holder and a colon: the leased groups are found in the ready sets
-- above now (a leased group stays in its tier's set, scored by its lease's expiry) and in the
-- paused and blocked indexes, so the cost follows the leases and parked groups out, not the
-- queue's groups.
-- needs: clock
local now = clock(ARGV[1])
local include_gone = ARGV[2] == '1'
local multiple = tonumber(ARGV[3])
local FIELDS = {'holder', 'host', 'pid', 'version', 'conc', 'every', 'slots', 'start', 'last'}
local listed = {}
local ids = redis.call('ZRANGE', WORKERS, 0, -1)
for _, id in ipairs(ids) do
  local h = redis.call('HMGET', wkey(id), unpack(FIELDS))
  if h[1] and (include_gone
      or now - tonumber(h[9]) <= multiple * tonumber(h[6])) then
    listed[#listed + 1] = {id, h}
  end
end
local out = {fmt(now)}
if #listed == 0 then return out end
-- The live leases of the queue: {gid, mid, holder, expiry}.
local leases = {}
local function consider(gid)
  local g = redis.call('HMGET', gkey(gid), 'token', 'mid', 'holder', 'at')
  if g[1] and g[3] and g[4] and tonumber(g[4]) > now then
    leases[#leases + 1] = {gid, g[2], g[3], g[4]}
  end
end
for prio = 0, 4 do
  for _, gid in ipairs(redis.call('ZRANGE', rkey(prio), '(' .. fmt(now), '+inf', 'BYSCORE')) do
    consider(gid)
  end
end
for _, gid in ipairs(redis.call('ZRANGE', PAUSED, 0, -1)) do consider(gid) end
for _, gid in ipairs(redis.call('ZRANGE', BLOCKED, 0, -1)) do consider(gid) end
for _, row in ipairs(listed) do
  local id, h = row[1], row[2]
  local prefix = h[1] .. ':'
  local mine = {}
  for _, lease in ipairs(leases) do
    if string.sub(lease[3], 1, #prefix) == prefix then mine[#mine + 1] = lease end
  end
  out[#out + 1] = id
  for i = 1, 9 do out[#out + 1] = h[i] end
  out[#out + 1] = tostring(#mine)
  for _, lease in ipairs(mine) do
    for i = 1, 4 do out[#out + 1] = lease[i] end
  end
end
return out
