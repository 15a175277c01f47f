-- set_history. ARGV: now (unused), then "off", or the retention: keep_s and max_rows, each
-- "-" when not given. Stores the queue's history setting (lib/history.lua): every script that
-- settles a message reads it. Turning it off keeps what was recorded. Returns 1.
-- needs: history
if ARGV[2] == 'off' then
  redis.call('DEL', HIST)
else
  redis.call('SET', HIST, ARGV[2] .. ' ' .. ARGV[3])
end
return 1
