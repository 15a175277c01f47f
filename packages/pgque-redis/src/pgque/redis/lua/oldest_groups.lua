-- oldest_groups. ARGV: now, state ("" = any), limit, cursor score ("" = from the start),
-- cursor group id (the last group the call before examined), budget (how many groups this
-- call may examine).
-- Returns "1" if the scan reached the end of P.."heads" (else "0"), the score and the id of
-- the last group it examined ("" if none), then 12 strings per group (see group_info), oldest
-- head first, ties in byte order of id (P.."heads" orders equal scores so).
-- An empty reply: due scheduled messages are to join first (see more_due), or P.."heads" is
-- still being built for a queue written before it existed: this call indexed up to budget
-- groups of P.."groups" (from the cursor P.."heads:at"); call again.
-- needs: clock, store, messages, groups, group_info, enqueue
check_layout()
local now = clock(ARGV[1])
local want = ARGV[2]
local limit = tonumber(ARGV[3])
local score, after = ARGV[4], ARGV[5]
local budget = tonumber(ARGV[6])
if more_due(now) then return {} end
if redis.call('GET', HEADS_OK) ~= '1' then
  local start = redis.call('GET', HEADS_AT) or '-'
  local ids = redis.call('ZRANGEBYLEX', GROUPS, start, '+', 'LIMIT', 0, budget)
  for _, gid in ipairs(ids) do refresh_head(gid) end
  if #ids < budget then
    redis.call('SET', HEADS_OK, '1')
    redis.call('DEL', HEADS_AT)
  else
    redis.call('SET', HEADS_AT, '(' .. ids[#ids])
  end
  return {}
end
local out = {'0', '', ''}
local count, examined = 0, 0
-- Examine gid (its head enqueued at s): listed when it still holds a message (an entry left by
-- messages that vanished outside pgque is skipped) and is in the state wanted.
local function examine(gid, s)
  examined = examined + 1
  out[2], out[3] = s, gid
  local h = redis.call('HMGET', gkey(gid), unpack(GROUP_FIELDS))
  if h[1] and redis.call('EXISTS', qkey(gid)) == 1
      and (want == '' or group_state(h, now) == want) then
    local info = group_info(gid, h, now)
    for i = 1, 12 do out[#out + 1] = info[i] end
    count = count + 1
  end
end
-- Examine the groups of score s whose ids come after id (the rest of a run of equal scores);
-- false when the page is full or the budget spent.
local function rest_of_run(s, id)
  for _, gid in ipairs(redis.call('ZRANGE', HEADS, s, s, 'BYSCORE')) do
    if count >= limit or examined >= budget then return false end
    if bytes_less(id, gid) then examine(gid, s) end
  end
  return true
end
local low = '-inf'
if score ~= '' then
  -- The rest of the cursor's score first.
  if not rest_of_run(score, after) then return out end
  low = '(' .. score
end
while count < limit and examined < budget do
  -- A chunk ends inside a run of equal scores at most once: the next round takes that score's
  -- remaining ids whole, as above.
  local chunk = math.min(budget - examined, math.max(limit - count, 64))
  local rows = redis.call('ZRANGE', HEADS, low, '+inf', 'BYSCORE', 'LIMIT', 0, chunk,
    'WITHSCORES')
  for i = 1, #rows, 2 do
    examine(rows[i], rows[i + 1])
    if count >= limit then return out end
  end
  if #rows < 2 * chunk then
    out[1] = '1'
    return out
  end
  local s = out[2]
  if not rest_of_run(s, out[3]) then return out end
  low = '(' .. s
end
return out
