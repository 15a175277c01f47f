-- publish / publish_many. ARGV: now, prio, delay (seconds; "0" = none), then (group id, event
-- JSON, fairness key) triples; the key ("" = the default key) is the group's if the message is
-- its first, like prio. Returns the new message ids, in order.
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
  for i = 4, #ARGV, 3 do
    ids[#ids + 1] = schedule_one(ARGV[i], ARGV[i + 1], prio, now, due, ARGV[i + 2])
  end
else
  for i = 4, #ARGV, 3 do
    ids[#ids + 1] = publish_one(ARGV[i], ARGV[i + 1], prio, now, ARGV[i + 2])
  end
end
announce()
return ids
