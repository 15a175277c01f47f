-- publish unless deduplicated (pgque.partition's dedup window). A script on the queue's keys,
-- as the operations are (KEYS as lib/keys.lua says: the meta key and the fence; P the prefix).
-- ARGV: now, prio, group id, event JSON, dedup key, ttl in milliseconds (rounded up), ttl in
-- seconds (exact).
-- Returns {message id, 1 if deduplicated else 0}.
--
-- P.."dd:"..key holds "<message id>|<window end>", the end measured on the script's "now" (the
-- server's TIME, or the injected clock of tests), so every backend judges the window on the
-- same clock. P.."dd" indexes the keys by window end: each call reaps up to 16 ended windows
-- (as PostgreSQL and memory do), and purge finds every key without scanning the keyspace. A
-- key's own expiry (PX) only bounds its memory should no later call reap it: the window's
-- length on the server's clock, a day more under an injected clock (which need not follow the
-- server's). A value without "|" (written before the window end was stored) is trusted while
-- it exists. Values written before the index are not in it, so purge cannot find them: it
-- records instead the last message id issued (P.."ddfloor"), and a value naming an id at or
-- below it is a purged window, as if deleted.
-- needs: clock, enqueue
local now = clock(ARGV[1])
local index = P .. 'dd'
for _, ended in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', fmt(now), 'LIMIT', 0, 16)) do
  redis.call('DEL', P .. 'dd:' .. ended)
  redis.call('ZREM', index, ended)
end
local ddkey = P .. 'dd:' .. ARGV[5]
local first = redis.call('GET', ddkey)
if first then
  local bar = string.find(first, '|', 1, true)
  local fid = first
  if bar then fid = string.sub(first, 1, bar - 1) end
  local floor = tonumber(redis.call('GET', P .. 'ddfloor') or '0') or 0
  if (tonumber(fid) or 0) > floor then
    if not bar then
      return {first, 1}
    end
    if tonumber(string.sub(first, bar + 1)) > now then
      return {fid, 1}
    end
  end
end
local id = publish_one(ARGV[3], ARGV[4], ARGV[2], now)
local ttl_ms = tonumber(ARGV[6])
local gc_ms = ttl_ms
if ARGV[1] ~= '' then gc_ms = ttl_ms + 86400000 end
local ends = fmt(now + tonumber(ARGV[7]))
redis.call('SET', ddkey, id .. '|' .. ends, 'PX', gc_ms)
redis.call('ZADD', index, ends, ARGV[5])
return {id, 0}
