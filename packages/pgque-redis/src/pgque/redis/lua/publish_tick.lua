-- publish_tick. ARGV: now, entry, tick, prio, group id, event JSON, fairness key ("" = none).
-- If P.."ticks" has no tick of entry, or one below tick: records tick as the entry's last and
-- appends the event to the group's tail (as publish does), returning its id, all in this one
-- script; else returns nil (false) and changes nothing. Of several schedulers publishing one
-- tick, exactly one appends.
-- needs: clock, store, wakeups, enqueue
check_layout()
local now = clock(ARGV[1])
local entry = ARGV[2]
local tick = tonumber(ARGV[3])
local last = redis.call('HGET', TICKS, entry)
if last and tonumber(last) >= tick then return false end
local id = publish_one(ARGV[5], ARGV[6], ARGV[4], now, ARGV[7])
redis.call('HSET', TICKS, entry, fmt(tick))
announce()
return id
