-- purge. ARGV: now (unused).
-- Deletes every message, group and dead letter of the queue. The id counters stay, so message
-- ids keep growing. One script: Redis serves nothing else meanwhile, so purge big queues at a
-- quiet time.
for prio = 0, 4 do
  local key = rkey(prio)
  for _, gid in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    redis.call('DEL', gkey(gid), qkey(gid))
  end
  redis.call('DEL', key)
end
for _, gid in ipairs(redis.call('SMEMBERS', BLOCKED)) do
  redis.call('DEL', gkey(gid), qkey(gid))
end
for _, did in ipairs(redis.call('ZRANGE', DEAD, 0, -1)) do
  redis.call('DEL', dkey(did))
end
redis.call('DEL', BLOCKED, DEAD, MSG, ATT, ENQ)
return 1
