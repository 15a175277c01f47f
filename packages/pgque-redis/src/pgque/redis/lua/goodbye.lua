-- goodbye. ARGV: now (unused), worker id. Removes the worker's hash and its entry in
-- P.."workers". Returns 1 if it had one, else 0.
local removed = redis.call('ZREM', WORKERS, ARGV[2])
redis.call('DEL', wkey(ARGV[2]))
return removed
