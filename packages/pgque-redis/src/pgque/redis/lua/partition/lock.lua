-- Take a key's lock if free: SET NX PX with the holder's token. Returns the fencing epoch
-- (the server's time in microseconds, so it grows with each grant), or 0 if the key is held.
-- KEYS[1] = the lock key; ARGV: token, ttl in milliseconds.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
return 0
