-- next_due. ARGV: now. Returns {earliest due time of a scheduled message ("" if none), now}:
-- an idle worker waits no longer than until then.
-- needs: clock
local now = clock(ARGV[1])
local first = redis.call('ZRANGE', SCHED, 0, 0, 'WITHSCORES')
return {first[2] or '', fmt(now)}
