-- The statements of sql_ab.py, one per "-- name:" block. {schema} is the schema under test
-- (pgque_fifo, or the baseline's copy), filled in with psycopg.sql.Identifier. They call the
-- entry points the transports call, so a baseline must have them too (schema version 17 or
-- later); to compare with an older schema, run sql_ab.py of a revision of its time.

-- name: publish
SELECT {schema}.pgque_publish_v2(%(q)s, %(g)s, '{{"id":"x","kind":"k","data":{{}},"headers":{{}},"created_at":"2026-01-01T00:00:00+00:00"}}', 0, NULL, NULL)

-- name: publish_many
SELECT {schema}.pgque_publish_many_v2(%(q)s, %(gs)s::text[], %(es)s::text[], 0, NULL, NULL)

-- name: claim
SELECT group_id, message_id, token FROM {schema}.pgque_claim_v2(%(q)s, 1, 30, 0, NULL, 'dead_letter', NULL, NULL)

-- name: ack
SELECT {schema}.pgque_ack_v1(%(q)s, %(g)s, %(m)s, %(t)s, NULL)

-- name: dead_letter
SELECT {schema}.pgque_dead_letter_v2(%(q)s, %(g)s, %(m)s, %(t)s, 'bench', NULL, NULL)

-- name: redrive
SELECT {schema}.pgque_redrive_v3(%(q)s, NULL, false, false, NULL)

-- name: purge
SELECT {schema}.pgque_purge_v1(%(q)s)

-- name: stats
SELECT * FROM {schema}.pgque_stats_v3(%(q)s, NULL)

-- name: dedup
SELECT * FROM {schema}.pgque_publish_dedup_v1(%(q)s, %(g)s, '{{"id":"x","kind":"k","data":{{}},"headers":{{}},"created_at":"2026-01-01T00:00:00+00:00"}}', 0, %(k)s, 60, NULL)

-- name: partition_purge
SELECT {schema}.pgque_partition_purge_v1(%(q)s)
