-- Fix the slot count of a queue on first use; return the count in force.
-- KEYS[1] = the queue prefix P; ARGV[1] = the slot count asked for.
local key = KEYS[1] .. 'pk:slots'
redis.call('SET', key, ARGV[1], 'NX')
return redis.call('GET', key)
