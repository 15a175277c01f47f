-- dead_letters. ARGV: now (unused), limit.
-- Returns 8 strings per dead letter, oldest first: id, group, message id, event JSON,
-- priority, attempts, reason, failed_at.
local out = {}
for _, did in ipairs(redis.call('ZRANGE', DEAD, 0, tonumber(ARGV[2]) - 1)) do
  local d = redis.call('HMGET', dkey(did), 'g', 'm', 'b', 'p', 'a', 'r', 't')
  out[#out + 1] = did
  for i = 1, 7 do out[#out + 1] = d[i] or '' end
end
return out
