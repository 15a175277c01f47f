-- history: the queue's job history (docs/history.md): its setting, and the record a settling
-- script appends to the queue's stream, in the same script as the settlement it records.
-- needs: clock
--
-- Keys under the prefix P (see keys.lua):
--   P.."hist"         string "<keep_s> <max_rows>" ("-" for a bound not given): the queue's
--                           history setting; absent: history is off (set_history.lua)
--   P.."hlog"         stream of the records, oldest first; each entry's fields are
--                           m (message id), g (group id), o (outcome), a (attempt), t
--                           (finished_at), and when known: k (kind), f (fairness key), p
--                           (published_at), s (started_at), w (worker), e (error JSON), r
--                           (reason). Capped by MAXLEN ~ max_rows at each XADD and by
--                           MINID ~ (the server's TIME - keep_s) once per script that records.
--   P.."hm:"..hour    hash  message id -> the entry ids of its records made in that hour
--                           (hours since the epoch, by the entry id's time), oldest first,
--                           space-separated: a message's story is read from these without
--                           scanning the stream. Each hour's hash expires keep_s (30 days with a
--                           row cap alone: HISTORY_INDEX_TTL) and an hour after its last write.
-- A record's id (HistoryRecord.id) is its entry id "<ms>-<seq>" as ms * 1024 + seq
-- (pgque/redis/_history.py): entry ids grow, so record ids do; a record whose seq would reach
-- 1024 (more records in one millisecond than that) takes the next millisecond's first id.
local HIST = P .. 'hist'
local HLOG = P .. 'hlog'
local function hmkey(hour) return P .. 'hm:' .. string.format('%d', hour) end

-- How long an hour of the message index lives after its last write when the setting has no
-- duration (a row cap alone), in seconds: a message's records older than that are not found
-- by history(message_id=).
local HISTORY_INDEX_TTL = 30 * 86400
-- The span of one hash of the message index, in seconds.
local HISTORY_INDEX_SPAN = 3600
-- The entry id's sequence numbers a record id has room for (see above).
local HISTORY_SEQ_LIMIT = 1024

-- The setting, read once per script on the first settlement that asks (false: off).
local history_setting_cache = nil
-- Whether this script has trimmed the stream by the duration yet (once per script), and the
-- hour of the message index it last set to expire.
local history_trimmed = false
local history_index_hour = nil

-- The queue's history setting: false when off, else {keep = seconds or nil, rows = the row
-- cap's text or nil}.
local function history_setting()
  if history_setting_cache == nil then
    local v = redis.call('GET', HIST)
    local keep, rows = nil, nil
    if v then keep, rows = string.match(v, '^(%S+) (%S+)$') end
    if not keep then
      history_setting_cache = false
    else
      history_setting_cache = {keep = tonumber(keep), rows = tonumber(rows) and rows}
    end
  end
  return history_setting_cache
end

-- The kind of a stored event's JSON ('' when it cannot be read). Events pgque wrote start
-- {"id":"...","kind":"...": read from there without decoding the whole event (a kind with an
-- escape in it, or JSON written otherwise, is decoded).
local function event_kind(body)
  if not body then return '' end
  local kind = string.match(body, '^{"id":"[^"\\]*","kind":"([^"\\]*)"')
  if kind then return kind end
  local ok, event = pcall(cjson.decode, body)
  if ok and type(event) == 'table' and type(event.kind) == 'string' then return event.kind end
  return ''
end

-- Append one record (fields as the stream's, see above; nil for none) under setting s; keep
-- the stream within the setting's bounds and the message's index.
local function append_history(s, mid, gid, body, fk, outcome, attempt, published, started,
    finished, worker, err, reason)
  local fields = {'m', mid, 'g', gid, 'o', outcome, 'a', attempt or '0', 't', fmt(finished),
    'k', event_kind(body)}
  if fk and fk ~= '' then fields[#fields + 1] = 'f'; fields[#fields + 1] = fk end
  if published then fields[#fields + 1] = 'p'; fields[#fields + 1] = published end
  if started then fields[#fields + 1] = 's'; fields[#fields + 1] = started end
  if worker and worker ~= '' then fields[#fields + 1] = 'w'; fields[#fields + 1] = worker end
  if err then fields[#fields + 1] = 'e'; fields[#fields + 1] = err end
  if reason then fields[#fields + 1] = 'r'; fields[#fields + 1] = reason end
  local id
  if s.rows then
    id = redis.call('XADD', HLOG, 'MAXLEN', '~', s.rows, '*', unpack(fields))
  else
    id = redis.call('XADD', HLOG, '*', unpack(fields))
  end
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if tonumber(seq) >= HISTORY_SEQ_LIMIT then
    redis.call('XDEL', HLOG, id)
    id = redis.call('XADD', HLOG, string.format('%d', tonumber(ms) + 1) .. '-0',
      unpack(fields))
  end
  if s.keep and not history_trimmed then
    history_trimmed = true
    local t = redis.call('TIME')
    local floor = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      - math.ceil(s.keep * 1000)
    if floor > 0 then redis.call('XTRIM', HLOG, 'MINID', '~', string.format('%d', floor)) end
  end
  local hour = math.floor(tonumber(string.match(id, '^(%d+)-')) / 1000 / HISTORY_INDEX_SPAN)
  local index = hmkey(hour)
  local ids = redis.call('HGET', index, mid)
  redis.call('HSET', index, mid, ids and (ids .. ' ' .. id) or id)
  if history_index_hour ~= hour then
    history_index_hour = hour
    redis.call('EXPIRE', index, math.ceil(s.keep or HISTORY_INDEX_TTL) + HISTORY_INDEX_SPAN)
  end
end

-- Record outcome of message mid of group gid, still in its records (P.."msg", P.."att",
-- P.."enq"), at now, when the queue's history is on: when leased, the lease's start and
-- holder from the group's hash. err is the error given (a dead letter without one records the
-- message's last); reason a dead letter's. A message id that is no number is not recorded.
local function record_history(outcome, gid, mid, now, leased, err, reason)
  local s = history_setting()
  if not s or not string.match(mid, '^%d+$') then return end
  local body = redis.call('HGET', MSG, mid)
  local attempt = redis.call('HGET', ATT, mid)
  local published = redis.call('ZSCORE', ENQ, mid)
  local g = redis.call('HMGET', gkey(gid), 'fk', 'holder', 'ls')
  if not err and (outcome == 'dead_lettered' or outcome == 'exhausted') then
    err = redis.call('HGET', ERR, mid) or nil
  end
  local started, worker = nil, nil
  if leased then started, worker = g[3] or nil, g[2] or nil end
  append_history(s, mid, gid, body, g[1] or nil, outcome, attempt or '0', published or nil,
    started, now, worker, err, reason)
end

-- Record the redrive of dead letter d (its hash's fields g, b, a, m, q, k, e, r by name) at
-- now, when the queue's history is on.
local function record_redrive(d, now)
  local s = history_setting()
  if not s or not d.g or not d.m or not string.match(d.m, '^%d+$') then return end
  append_history(s, d.m, d.g, d.b, d.k, 'redriven', d.a, d.q, nil, now, nil, d.e, d.r)
end
