-- pgbench script: claim one message and ack it, as a worker does, with no Python in the loop.
-- :queue is bound (pgbench -M prepared -D queue=...). One transaction = one message.
SELECT group_id AS g, message_id AS m, token AS t
  FROM pgque_fifo.pgque_claim_v2(:queue, 1, 30, 0, NULL, 'dead_letter', NULL, NULL) \gset
SELECT pgque_fifo.pgque_ack_v1(:queue, :g, :m, :t, NULL);
