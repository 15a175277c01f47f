-- dead_letters. ARGV: now (unused), limit, after ("" = from the first; else a dead-letter id).
-- Returns 9 strings per dead letter with an id above after, in id order: id, group, message
-- id, event JSON, priority, attempts, reason, failed_at, error JSON ("" = none).
-- needs: store
check_layout()
local low = '-inf'
if ARGV[3] ~= '' then low = '(' .. ARGV[3] end
local out = {}
for _, did in ipairs(redis.call('ZRANGEBYSCORE', DEAD, low, '+inf', 'LIMIT', 0,
    tonumber(ARGV[2]))) do
  local d = redis.call('HMGET', dkey(did), 'g', 'm', 'b', 'p', 'a', 'r', 't', 'e')
  out[#out + 1] = did
  for i = 1, 8 do out[#out + 1] = d[i] or '' end
end
return out
