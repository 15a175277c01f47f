-- scheduled. ARGV: now, limit, after ("" = from the first; else a message id), and a group id
-- to list only that group's (its P.."sq:"..gid, read whole and sorted by id: a group's
-- scheduled messages, as PostgreSQL's scheduled_group index reads them).
-- Returns 6 strings per scheduled message not due yet with an id above after, in id order:
-- id, group id, due time, event JSON, priority, publish time; or nil (false) when more than a
-- batch was due (see more_due): the transport moves the rest by join_due.lua calls and asks
-- again, so no page reads past a backlog of due messages in one script.
-- needs: clock, store, enqueue
check_layout()
local now = clock(ARGV[1])
-- Listed as if every due scheduled message had joined its group: they join now.
if more_due(now) then return false end
local limit = tonumber(ARGV[2])
local low = '-inf'
if ARGV[3] ~= '' then low = '(' .. ARGV[3] end
local out = {}
local count = 0
local gid = ARGV[4]
if gid and gid ~= '' then
  local keys = redis.call('ZRANGEBYSCORE', sqkey(gid), '(' .. fmt(now), '+inf')
  table.sort(keys)
  local from = ARGV[3] == '' and '' or sched_key(ARGV[3])
  for _, key in ipairs(keys) do
    if key > from then
      local h = redis.call('HMGET', skey(key), 'g', 'd', 'b', 'p', 't')
      if h[1] then
        out[#out + 1] = sched_id(key)
        for j = 1, 5 do out[#out + 1] = h[j] end
        count = count + 1
        if count >= limit then break end
      end
    end
  end
  return out
end
while count < limit do
  local keys = redis.call('ZRANGEBYSCORE', SIDS, low, '+inf', 'WITHSCORES', 'LIMIT', 0,
    math.max(limit - count, 64))
  if #keys == 0 then break end
  for i = 1, #keys, 2 do
    local key = keys[i]
    low = '(' .. keys[i + 1]
    local h = redis.call('HMGET', skey(key), 'g', 'd', 'b', 'p', 't')
    if not h[1] then
      -- Its hash vanished outside pgque (eviction, a manual DEL): nothing to list, ever.
      redis.call('ZREM', SCHED, key)
      redis.call('ZREM', SIDS, key)
    elseif tonumber(h[2]) > now then
      out[#out + 1] = sched_id(key)
      for j = 1, 5 do out[#out + 1] = h[j] end
      count = count + 1
      if count >= limit then break end
    end
  end
end
return out
