-- delete_dead_letters. ARGV: now (unused), then dead-letter ids (distinct).
-- Returns how many of them existed (and are deleted now).
-- needs: store
check_layout()
local count = 0
for i = 2, #ARGV do
  if redis.call('ZREM', DEAD, ARGV[i]) == 1 then
    redis.call('DEL', dkey(ARGV[i]))
    count = count + 1
  end
end
return count
