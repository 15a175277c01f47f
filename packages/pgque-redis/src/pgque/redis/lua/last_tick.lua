-- last_tick. ARGV: now (unused), entry. Returns the entry's last published tick, or nil.
check_layout()
return redis.call('HGET', TICKS, ARGV[2])
