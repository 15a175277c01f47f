-- Release a key's lock only if the caller's token still holds it (a holder whose TTL ran out
-- must not free the next holder's lock). KEYS[1] = the lock key; ARGV[1] = token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
