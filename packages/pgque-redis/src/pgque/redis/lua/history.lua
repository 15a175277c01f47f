-- history. ARGV: now, where to start reading the stream ("+": at its newest record; "(" and
-- an entry id: before that entry), limit, budget (entries examined at most), then the filters
-- ("" = any): group id, kind, since (epoch seconds), outcome, message id.
-- Returns the id of the last entry examined when older ones are left to examine ("" when none
-- is: the stream is read to its end, or to records older than since or the retention), then
-- 13 strings per record matching every filter, newest first, at most limit: entry id, message
-- id, group id, kind, fairness key, outcome, attempt, published_at, started_at, finished_at,
-- worker, error, reason ("" for none).
--
-- Records finished before since, or before now - keep_s of the queue's setting, are never
-- returned; the stream holds records in the order they were appended, by the store's clock, so
-- reading stops at the first such record. With a message id, only its own records are read,
-- through the message index (P.."hm:"..hour, lib/history.lua), in one call: one HGET per hour
-- the index may cover; else the stream is examined, newest first, at most budget entries per
-- call.
-- needs: clock, history
local now = clock(ARGV[1])
local limit = tonumber(ARGV[3])
local budget = tonumber(ARGV[4])
local group, kind, outcome, mid = ARGV[5], ARGV[6], ARGV[8], ARGV[9]
local floor = -math.huge
if ARGV[7] ~= '' then floor = tonumber(ARGV[7]) end
local s = history_setting()
if s and s.keep then floor = math.max(floor, now - s.keep) end

local out = {''}
local count = 0
-- Add entry (id, its flat field list) to out when it matches; 'old' when it is older than the
-- floor (so is every entry after it), nil otherwise.
local function take(id, flat)
  local r = {}
  for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end
  local t = tonumber(r.t or '')
  if not (t and r.m and r.g and r.o) then return nil end
  if t < floor then return 'old' end
  if (group == '' or r.g == group) and (kind == '' or r.k == kind)
      and (outcome == '' or r.o == outcome) and (mid == '' or r.m == mid) then
    local fields = {id, r.m, r.g, r.k or '', r.f or '', r.o, r.a or '0', r.p or '', r.s or '',
      r.t, r.w or '', r.e or '', r.r or ''}
    for i = 1, 13 do out[#out + 1] = fields[i] end
    count = count + 1
  end
  return nil
end

-- Whether entry id a comes before entry id b ("<ms>-<seq>" each).
local function entry_before(a, b)
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  if tonumber(ams) ~= tonumber(bms) then return tonumber(ams) < tonumber(bms) end
  return tonumber(aseq) < tonumber(bseq)
end

if mid ~= '' then
  -- The hours from the newest entry's (or now, if later) back to the oldest the index keeps.
  local t = redis.call('TIME')
  local now_s = tonumber(t[1])
  local top = now_s
  local newest = redis.call('XREVRANGE', HLOG, '+', '-', 'COUNT', 1)[1]
  if newest then top = math.max(top, tonumber(string.match(newest[1], '^(%d+)-')) / 1000) end
  local span = HISTORY_INDEX_TTL
  if s and s.keep then span = math.max(span, s.keep) end
  if not s then span = 366 * 86400 + HISTORY_INDEX_TTL end
  local before = nil
  if ARGV[2] ~= '+' then before = string.sub(ARGV[2], 2) end
  local hour = math.floor(top / HISTORY_INDEX_SPAN)
  local oldest = math.floor((now_s - span) / HISTORY_INDEX_SPAN) - 1
  while hour >= oldest and count < limit do
    local listed = redis.call('HGET', hmkey(hour), mid)
    if listed then
      local ids = {}
      for id in string.gmatch(listed, '%S+') do ids[#ids + 1] = id end
      for i = #ids, 1, -1 do
        if before == nil or entry_before(ids[i], before) then
          local entry = redis.call('XRANGE', HLOG, ids[i], ids[i])[1]
          if entry and take(entry[1], entry[2]) == 'old' then return out end
          if count >= limit then return out end
        end
      end
    end
    hour = hour - 1
  end
  return out
end

local entries = redis.call('XREVRANGE', HLOG, ARGV[2], '-', 'COUNT', budget)
for _, entry in ipairs(entries) do
  if take(entry[1], entry[2]) == 'old' then return out end
  if count >= limit then
    out[1] = entry[1]
    return out
  end
end
if #entries >= budget then out[1] = entries[#entries][1] end
return out
