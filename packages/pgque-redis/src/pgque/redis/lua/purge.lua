-- purge. ARGV: now (unused).
-- Deletes every message, group, dead letter, scheduled message, tick record, fairness key's
-- history and job history record of the queue (key policies and the job history's setting
-- stay). The id counters stay, so message ids keep growing. One script: Redis serves nothing
-- else meanwhile, so purge big queues at a quiet time. It also empties a queue written in an
-- older key layout (no layout check).
-- needs: history
local function members(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'zset' then return redis.call('ZRANGE', key, 0, -1) end
  if kind == 'set' then return redis.call('SMEMBERS', key) end
  return {}
end
local index = {GROUPS, BLOCKED, PAUSED}
for prio = 0, 4 do index[#index + 1] = rkey(prio) end
for _, key in ipairs(index) do
  for _, gid in ipairs(members(key)) do
    redis.call('DEL', gkey(gid), qkey(gid), sqkey(gid))
  end
  redis.call('DEL', key)
end
for _, did in ipairs(redis.call('ZRANGE', DEAD, 0, -1)) do
  redis.call('DEL', dkey(did))
end
for _, key in ipairs(redis.call('ZRANGE', SCHED, 0, -1)) do
  local gid = redis.call('HGET', skey(key), 'g')
  if gid then redis.call('DEL', sqkey(gid)) end
  redis.call('DEL', skey(key))
end
-- The fairness keys' indexes, finish tags, buckets and virtual clock go (shares start level
-- again); their policies (configuration) stay, and a key with a policy stays listed.
for _, index in ipairs({KALL, KQ}) do
  for _, fk in ipairs(redis.call('ZRANGE', index, 0, -1)) do
    redis.call('DEL', krkey(fk), kgkey(fk), klkey(fk))
  end
end
redis.call('DEL', KALL, KQ, KF, KB, KV)
for _, fk in ipairs(redis.call('HKEYS', KP)) do
  if fk ~= DEFAULT_POLICY then redis.call('ZADD', KALL, 0, fk) end
end
redis.call('DEL', DEAD, MSG, ATT, ERR, ENQ, LAYOUT_KEY, SCHED, SIDS, TICKS, HEADS, HEADS_OK,
  HEADS_AT)
-- The job history's records go, with the hours of the message index they were listed in.
local after = '-'
local hours = {}
while true do
  local entries = redis.call('XRANGE', HLOG, after, '+', 'COUNT', 1000)
  for _, entry in ipairs(entries) do
    local ms = tonumber(string.match(entry[1], '^(%d+)-'))
    local hour = math.floor(ms / 1000 / HISTORY_INDEX_SPAN)
    if not hours[hour] then
      hours[hour] = true
      redis.call('DEL', hmkey(hour))
    end
  end
  if #entries < 1000 then break end
  after = '(' .. entries[#entries][1]
end
redis.call('DEL', HLOG)
return 1
