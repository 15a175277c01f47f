-- stats. ARGV: now.
-- Returns strings: groups, messages, in_flight, parked, blocked, dead letters,
-- earliest enqueue time ("" if none), next resume time ("" if none), now, paused, scheduled
-- (not due), earliest due time ("" if none).
-- Each group counts in one of paused / blocked / in_flight / parked (or none when ready):
-- paused and blocked groups are in their indexes, never in a ready set; a group of a ready set
-- whose score lies after now is in flight when it holds a lease (P.."rl"), else parked
-- (P.."rp"). Every count is a cardinality or a score range's count (ZCOUNT): its cost does not
-- grow with the queue.
-- needs: clock, store, enqueue
check_layout()
local now = clock(ARGV[1])
local nowf = fmt(now)
-- Counted as if every due scheduled message had joined its group: they join now (an empty
-- reply when more than a batch was due, see more_due).
if more_due(now) then return {} end
local later = '(' .. nowf
local resume = redis.call('ZRANGEBYSCORE', WAITING, later, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local oldest = redis.call('ZRANGE', ENQ, 0, 0, 'WITHSCORES')
return {
  tostring(redis.call('ZCARD', GROUPS)),
  tostring(redis.call('HLEN', MSG)),
  tostring(redis.call('ZCOUNT', LEASED, later, '+inf')),
  tostring(redis.call('ZCOUNT', WAITING, later, '+inf')),
  tostring(redis.call('ZCARD', BLOCKED)),
  tostring(redis.call('ZCARD', DEAD)),
  oldest[2] or '',
  resume[2] and fmt(tonumber(resume[2])) or '',
  nowf,
  tostring(redis.call('ZCARD', PAUSED)),
  tostring(redis.call('ZCARD', SCHED)),
  redis.call('ZRANGE', SCHED, 0, 0, 'WITHSCORES')[2] or '',
}
