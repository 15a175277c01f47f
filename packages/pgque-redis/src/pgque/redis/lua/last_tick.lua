-- last_tick. ARGV: now (unused), entry. Returns the entry's last published tick, or nil.
-- needs: store
check_layout()
return redis.call('HGET', TICKS, ARGV[2])
