-- groups. ARGV: now, state ("" = any), limit, start (a ZRANGEBYLEX bound: "-" or "(" .. the
-- group id to start after, or "[" .. a prefix to start at), budget (how many group ids this
-- call may examine), and optionally stop (a ZRANGEBYLEX bound: "+" when absent, or "(" .. the
-- end of a prefix's range: groups(prefix=) reads that range of the index only).
-- Returns "1" if the scan reached the end of its index (else "0"), the last group id it
-- examined ("" if none), then 12 strings per group (see group_info), in byte order of id.
--
-- The index is P.."paused" or P.."blocked" for those states (every entry matches), else
-- P.."groups". A scan for a state stops when the page is full, the index ends or it has
-- examined budget ids; the caller goes on from the last id examined (so no call holds Redis
-- for long, and a group is examined once per page).
-- needs: clock, store, group_info, enqueue
check_layout()
local now = clock(ARGV[1])
local want = ARGV[2]
local limit = tonumber(ARGV[3])
local start = ARGV[4]
local budget = tonumber(ARGV[5])
local stop = ARGV[6] or '+'
-- Listed as if every due scheduled message had joined its group: they join now (an empty
-- reply when more than a batch was due, see more_due).
if more_due(now) then return {} end
local index = GROUPS
if want == 'paused' then
  index = PAUSED
elseif want == 'blocked' then
  index = BLOCKED
end
local out = {'0', ''}
local count, examined = 0, 0
while count < limit and examined < budget do
  local chunk = math.min(budget - examined, math.max(limit - count, 64))
  local ids = redis.call('ZRANGEBYLEX', index, start, stop, 'LIMIT', 0, chunk)
  for _, gid in ipairs(ids) do
    examined = examined + 1
    out[2] = gid
    local h = redis.call('HMGET', gkey(gid), unpack(GROUP_FIELDS))
    if h[1] and (want == '' or group_state(h, now) == want) then
      local info = group_info(gid, h, now)
      for i = 1, 12 do out[#out + 1] = info[i] end
      count = count + 1
      if count >= limit then break end
    end
  end
  if #ids < chunk then
    if count < limit or #ids == 0 then out[1] = '1' end
    break
  end
  start = '(' .. out[2]
end
return out
