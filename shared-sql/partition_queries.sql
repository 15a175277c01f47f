-- The statements of the partition-key layer (pgque.partition), one per "-- name:" block, loaded
-- by name like queries.sql. Parameters are bound and cast to the functions' exact types.

-- name: publish_dedup
SELECT message_id, deduped
  FROM pgque_fifo.pgque_publish_dedup_v1(%(queue)s::text, %(group_id)s::text, %(event)s::text,
                                         %(priority)s::integer, %(dedup_key)s::text,
                                         %(ttl)s::double precision, %(now)s::double precision)

-- name: dedup_reap
SELECT pgque_fifo.pgque_dedup_reap_v1(%(queue)s::text, %(limit)s::integer,
                                      %(now)s::double precision)

-- name: partition_slots
SELECT pgque_fifo.pgque_partition_slots_v1(%(queue)s::text, %(slots)s::integer,
                                           %(now)s::double precision)

-- name: partition_reset_slots
SELECT pgque_fifo.pgque_partition_reset_slots_v1(%(queue)s::text)

-- name: partition_purge
SELECT pgque_fifo.pgque_partition_purge_v1(%(queue)s::text)

-- name: try_key_lock
-- Tier A: the key's transaction-scoped advisory lock. Released by the COMMIT or ROLLBACK of
-- the transaction it runs in, never kept by a pooled connection handed to another client.
SELECT pg_try_advisory_xact_lock(hashtextextended(%(key)s::text, 0))

-- name: hash_keys
-- The server's hashtextextended of each key (checks the Python twin).
SELECT hashtextextended(k, 0) FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n
