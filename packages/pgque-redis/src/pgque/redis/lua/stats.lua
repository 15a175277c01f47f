-- stats. ARGV: now.
-- Returns strings: groups, messages, in_flight, parked, blocked, dead letters,
-- earliest enqueue time ("" if none), next resume time ("" if none), now, paused, scheduled
-- (not due), earliest due time ("" if none).
-- Each group counts in one of paused / blocked / in_flight / parked (or none when ready):
-- paused and blocked groups are in their indexes, never in a ready set.
-- needs: clock, store, enqueue
check_layout()
local now = clock(ARGV[1])
local nowf = fmt(now)
-- Counted as if every due scheduled message had joined its group: they join now (an empty
-- reply when more than a batch was due, see more_due).
if more_due(now) then return {} end
local in_flight, parked = 0, 0
local resume = nil
for prio = 0, 4 do
  -- Only groups whose until lies in the future are leased or parked.
  local later = redis.call('ZRANGEBYSCORE', rkey(prio), '(' .. nowf, '+inf', 'WITHSCORES')
  for i = 1, #later, 2 do
    if redis.call('HEXISTS', gkey(later[i]), 'token') == 1 then
      in_flight = in_flight + 1
    else
      parked = parked + 1
      local at = tonumber(later[i + 1])
      if resume == nil or at < resume then resume = at end
    end
  end
end
local oldest = redis.call('ZRANGE', ENQ, 0, 0, 'WITHSCORES')
return {
  tostring(redis.call('ZCARD', GROUPS)),
  tostring(redis.call('HLEN', MSG)),
  tostring(in_flight),
  tostring(parked),
  tostring(redis.call('ZCARD', BLOCKED)),
  tostring(redis.call('ZCARD', DEAD)),
  oldest[2] or '',
  resume and fmt(resume) or '',
  nowf,
  tostring(redis.call('ZCARD', PAUSED)),
  tostring(redis.call('ZCARD', SCHED)),
  redis.call('ZRANGE', SCHED, 0, 0, 'WITHSCORES')[2] or '',
}
