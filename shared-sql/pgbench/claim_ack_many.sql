-- pgbench script: claim up to :batch messages of distinct groups and ack them in one call.
-- One transaction = :batch messages while the backlog lasts.
SELECT array_agg(group_id) AS gs, array_agg(message_id) AS ms, array_agg(token) AS ts
  FROM pgque_fifo.pgque_claim_v2(:queue, :batch, 30, 0, NULL, 'dead_letter', NULL, NULL) \gset
SELECT pgque_fifo.pgque_ack_many_v1(:queue, :gs, :ms, :ts, NULL);
