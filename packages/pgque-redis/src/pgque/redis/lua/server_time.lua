-- server_time: the server's clock (TIME), the one that judges leases. ARGV: now (unused).
return redis.call('TIME')
