-- cancel. ARGV: now, message id. Returns 1 if the message was scheduled and not due yet (it
-- is deleted), else 0 (due, delivered, unknown, or published without a delay).
-- needs: clock, store
check_layout()
local now = clock(ARGV[1])
local key = sched_key(ARGV[2])
local due = redis.call('ZSCORE', SCHED, key)
if not due or tonumber(due) <= now then return 0 end
local gid = redis.call('HGET', skey(key), 'g')
if gid then redis.call('ZREM', sqkey(gid), key) end
redis.call('DEL', skey(key))
redis.call('ZREM', SCHED, key)
redis.call('ZREM', SIDS, key)
-- A hash that vanished outside pgque (eviction, a manual DEL) left no message to cancel: its
-- entries go (its group's P.."sq:" entry, unknown here, goes when that group is next joined).
if not gid then return 0 end
return 1
