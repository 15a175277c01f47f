-- pgbench script: the fused worker loop, one call per message, with no Python in the loop.
-- Each transaction settles (acks) the lease the previous transaction of this client claimed
-- and claims the next head: pgque_settle_claim_v1 with one settlement and n = 1.
-- pgbench keeps a client's variables from one transaction to the next, so :g, :m and :t carry
-- the lease over; bind a lease no one holds for the first transaction
-- (pgbench -M prepared -D queue=... -D g=none -D m=0 -D t=none): its settlement is fenced
-- (False) and changes nothing. So N transactions claim N messages and ack N - 1 of them: the last
-- lease of each client is left out (it expires and is redelivered). Like claim_ack.sql, every
-- transaction must find work: a claim that finds none binds a lease no one holds again.
SELECT COALESCE(max(group_id), '') AS g, COALESCE(max(message_id), 0) AS m,
       COALESCE(max(token), '') AS t
  FROM pgque_fifo.pgque_settle_claim_v1(
      :queue, ARRAY['ack'], ARRAY[:g], ARRAY[:m]::bigint[], ARRAY[:t],
      ARRAY[0]::double precision[], ARRAY['']::text[], ARRAY[NULL]::text[],
      1, 30, 0, NULL, 'dead_letter', NULL, NULL) \gset
