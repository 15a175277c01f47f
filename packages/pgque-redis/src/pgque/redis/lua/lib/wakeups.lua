-- wakeups: telling idle workers that a group became claimable (the channel P.."wake").

-- Tell idle workers to claim now: on the queue's sharded channel on a cluster, else PUBLISH.
local function announce()
  if SHARDED then
    redis.call('SPUBLISH', WAKE, '1')
  else
    redis.call('PUBLISH', WAKE, '1')
  end
end
