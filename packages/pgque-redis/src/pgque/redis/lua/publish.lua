-- publish / publish_many. ARGV: now, prio, delay (seconds; "0" = none), then (group id, event
-- JSON) pairs. Returns the new message ids, in order.
-- Without a delay each message goes to its group's tail, after the group's due scheduled
-- messages (publish_one moves them in first); with one every message is scheduled, due at
-- now + delay. Either way idle workers are woken: a waiter re-reads the next due time.
-- needs: clock, wakeups, enqueue
local now = clock(ARGV[1])
local prio = ARGV[2]
local delay = tonumber(ARGV[3])
local ids = {}
if delay > 0 then
  local due = now + delay
  for i = 4, #ARGV, 2 do
    ids[#ids + 1] = schedule_one(ARGV[i], ARGV[i + 1], prio, now, due)
  end
else
  for i = 4, #ARGV, 2 do
    ids[#ids + 1] = publish_one(ARGV[i], ARGV[i + 1], prio, now)
  end
end
announce()
return ids
