-- Statements of the benchmark harness (benchmarks/), one per "-- name:" block. They build
-- large queues directly (a million groups published one by one would take the whole run) and
-- hold a snapshot open; the measured operations themselves are pgque's own functions.

-- name: fill_groups
-- %(groups)s groups of one message each: g00000001, g00000002, ... (never served yet).
WITH g AS (
    INSERT INTO pgque_fifo.groups (queue, group_id, priority)
    SELECT %(queue)s::text, 'g' || lpad(i::text, 8, '0'), 0
      FROM generate_series(1, %(groups)s::integer) AS i
    RETURNING group_id
)
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
SELECT %(queue)s::text, g.group_id, %(event)s::text, extract(epoch FROM clock_timestamp())
  FROM g

-- name: fill_deep
-- One group, "deep", holding %(depth)s messages.
WITH g AS (
    INSERT INTO pgque_fifo.groups (queue, group_id, priority)
    VALUES (%(queue)s::text, 'deep', 0)
    RETURNING group_id
)
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
SELECT %(queue)s::text, g.group_id, %(event)s::text, extract(epoch FROM clock_timestamp())
  FROM g, generate_series(1, %(depth)s::integer)

-- name: hold_snapshot
-- Run inside a REPEATABLE READ transaction: takes a snapshot and an xid, so the xmin horizon
-- stays where it is until the transaction ends.
SELECT txid_current(), (SELECT count(*) FROM pgque_fifo.groups)

-- name: dead_tuples
SELECT relname, n_live_tup, n_dead_tup
  FROM pg_stat_user_tables
 WHERE schemaname = 'pgque_fifo' AND relname IN ('groups', 'messages')
 ORDER BY relname

-- name: database_exists
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = %(name)s::text)

-- name: procrastinate_installed
SELECT to_regclass('public.procrastinate_jobs') IS NOT NULL

-- name: procrastinate_clear
-- Drop every job a previous (possibly failed) run left in the harness's procrastinate queue.
DELETE FROM procrastinate_jobs WHERE queue_name = %(queue)s::text

-- name: vacuum
-- Before every case: the dead rows earlier cases left behind go, so that no system pays for
-- another's (a server may run without autovacuum; this one statement does its work).
VACUUM (ANALYZE)
