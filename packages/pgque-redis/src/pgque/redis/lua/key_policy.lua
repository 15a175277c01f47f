-- key_policy: a fairness key's own policy, or the default policy, read, stored or deleted.
-- ARGV: now (unused), action ("get" | "set" | "delete"), whose ("k": the key's own; "d": the
-- default policy of the keys without one), key ("" for "d"), then for "set" the policy as
-- stored ("<weight> <cap> <rate> <per> <burst>", "-" for none; see P.."kp" in lib/keys.lua).
-- Returns: get, the stored policy or nil; set, 1; delete, 1 if there was one, else 0.
-- A key with a policy of its own is listed by keys() (P.."kall") even without groups.
-- needs: store
check_layout()
local action = ARGV[2]
local field = ARGV[4]
if ARGV[3] == 'd' then field = DEFAULT_POLICY end
if action == 'get' then return redis.call('HGET', KP, field) end
if action == 'set' then
  touch_meta()
  redis.call('HSET', KP, field, ARGV[5])
  if field ~= DEFAULT_POLICY then redis.call('ZADD', KALL, 0, field) end
  return 1
end
local had = redis.call('HDEL', KP, field)
if field ~= DEFAULT_POLICY and redis.call('EXISTS', kgkey(field)) == 0 then
  redis.call('ZREM', KALL, field)
end
return had
