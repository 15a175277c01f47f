-- Forget a queue's partition state: its slot count and every dedup key. KEYS[1] = the queue
-- prefix P. Returns how many dedup keys were indexed.
--
-- One script, so a deduplicated publish or a slot-count write lands wholly before the purge
-- (and is forgotten) or after it (and stays): never between finding the keys and deleting
-- them. The keys are found through their index P.."dd" (see publish_dedup.lua), never
-- by scanning the keyspace. Keys written before the index existed are not in it: the last
-- message id issued is kept as P.."ddfloor", and publish_dedup.lua treats a value
-- naming an id at or below it as purged (message ids only grow: the transport's purge keeps
-- the counter).
local P = KEYS[1]
local index = P .. 'dd'
local keys = redis.call('ZRANGE', index, 0, -1)
for _, key in ipairs(keys) do
  redis.call('DEL', P .. 'dd:' .. key)
end
redis.call('DEL', index, P .. 'pk:slots')
redis.call('SET', P .. 'ddfloor', redis.call('GET', P .. 'seq') or '0')
return #keys
