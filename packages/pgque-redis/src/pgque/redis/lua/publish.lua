-- publish / publish_many. ARGV: now, prio, then (group id, event JSON) pairs.
-- Returns the new message ids, in order.
local now = clock(ARGV[1])
local prio = ARGV[2]
local ids = {}
for i = 3, #ARGV, 2 do
  ids[#ids + 1] = publish_one(ARGV[i], ARGV[i + 1], prio, now)
end
redis.call('PUBLISH', WAKE, '1')
return ids
