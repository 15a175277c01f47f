-- Forget the slot count of a drained queue; 0 if it still has messages (or had no count).
-- KEYS[1] = the queue prefix P.
if redis.call('HLEN', KEYS[1] .. 'msg') > 0 then
  return 0
end
return redis.call('DEL', KEYS[1] .. 'pk:slots')
