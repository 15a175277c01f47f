-- Forget a queue's partition state: its slot count and every dedup key. KEYS[1] = the queue
-- prefix P. Returns how many dedup keys were deleted.
--
-- One script, so a deduplicated publish or a slot-count write lands wholly before the purge
-- (and is forgotten) or after it (and stays): never between finding the keys and deleting
-- them. The scan walks the whole database while Redis serves nothing else, like the
-- transport's own purge: purge big databases at a quiet time.
local P = KEYS[1]
local pattern = string.gsub(P, '([%*%?%[%]\\])', '\\%1') .. 'dd:*'
local cursor = '0'
local deleted = 0
repeat
  local page = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
  cursor = page[1]
  for _, key in ipairs(page[2]) do
    deleted = deleted + redis.call('DEL', key)
  end
until cursor == '0'
redis.call('DEL', P .. 'pk:slots')
return deleted
