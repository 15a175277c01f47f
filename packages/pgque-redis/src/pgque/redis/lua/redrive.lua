-- redrive. ARGV: now, "all" or "ids", in place ("1" / "0"), retry now ("1" / "0"), then
-- dead-letter ids (sorted, distinct) when "ids". Returns how many dead letters went back.
--
-- In place, a dead letter goes back into its group under its original message id: the group's
-- messages are a sorted set by place (the id, or for a message that was scheduled the place it
-- took when it joined), so it lands ahead of every later message, and the next
-- claim of the group delivers it (a lease out is fenced by its own message id and finishes
-- first). Attempts start again at 0, the dead letter's error becomes its last error, and it
-- counts as enqueued now; with retry now its group's retry delay ends (end_delay).
-- A missing group is created with the dead letter's priority; an existing one keeps its
-- priority and its blocked or paused state (and its place in the round-robin). A dead letter
-- whose stored id is no message id (an undecodable head) goes to the tail under a new id, as
-- with in place "0". A group created by a dead letter takes its fairness key (k).
-- needs: clock, store, wakeups, messages, history, groups, enqueue
check_layout()
local now = clock(ARGV[1])
local in_place = ARGV[3] == '1'
local retry_now = ARGV[4] == '1'
local ids
if ARGV[2] == 'all' then
  ids = redis.call('ZRANGE', DEAD, 0, -1)
else
  ids = {}
  for i = 5, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local count = 0
for _, did in ipairs(ids) do
  if redis.call('ZSCORE', DEAD, did) then
    local d = redis.call('HMGET', dkey(did), 'g', 'b', 'p', 'm', 's', 'e', 'k', 'a', 'q', 'r')
    local mid = d[4]
    record_redrive({g = d[1] or nil, b = d[2] or nil, m = mid or nil, e = d[6] or nil, k = d[7] or nil,
      a = d[8] or nil, q = d[9] or nil, r = d[10] or nil}, now)
    if in_place and mid and string.match(mid, '^[1-9]%d*$') and #mid < 16
        and redis.call('HEXISTS', MSG, mid) == 0 then
      mark_layout()
      -- The group's due scheduled messages join first (they may create it, with their priority).
      join_group_due(d[1], now)
      enter_group(d[1], d[3], now, false, d[7] or '')
      redis.call('HDEL', ATT, mid)
      redis.call('HDEL', ERR, mid)
      add_message(d[1], mid, d[2], now, d[5] or nil)
      if d[6] then redis.call('HSET', ERR, mid, d[6]) end
      if retry_now then end_delay(d[1], now) end
    else
      publish_one(d[1], d[2], d[3], now, d[7] or '')
    end
    redis.call('DEL', dkey(did))
    redis.call('ZREM', DEAD, did)
    count = count + 1
  end
end
if count > 0 then announce() end
return count
