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

-- name: dashboard_groups
-- The dashboard case: %(groups)s groups g0000001.. of one message each, the higher ids' heads
-- the older (every message up to %(groups)s s old); every 1,000th group blocked (its head out
-- of attempts), every 997th paused, the rest ready, each served at a past time.
WITH g AS (
    INSERT INTO pgque_fifo.groups (queue, group_id, priority, until, blocked, paused)
    SELECT %(queue)s::text, 'g' || lpad(i::text, 7, '0'), 0, %(now)s::float8 - i,
           i %% 1000 = 0, i %% 997 = 0
      FROM generate_series(1, %(groups)s::integer) AS i
    RETURNING group_id
)
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, attempts)
SELECT %(queue)s::text, g.group_id, %(event)s::text,
       %(now)s::float8 - substr(g.group_id, 2)::integer,
       CASE WHEN substr(g.group_id, 2)::integer %% 1000 = 0 THEN 10 ELSE 0 END
  FROM g

-- name: dashboard_lease
-- Lease group %(group_id)s in the name of holder %(holder)s (host:pid) for an hour, as a claim
-- would: token, holder label (host:pid:slot), the head's id, lease start and expiry.
UPDATE pgque_fifo.groups g
   SET token = md5(g.group_id), holder = %(holder)s::text || ':' || %(slot)s::integer,
       leased_at = %(now)s::float8, until = %(now)s::float8 + 3600,
       leased_id = (SELECT min(m.id) FROM pgque_fifo.messages m
                     WHERE m.queue = g.queue AND m.group_id = g.group_id)
 WHERE g.queue = %(queue)s::text AND g.group_id = %(group_id)s::text

-- name: dashboard_history
-- %(rows)s history records finished on day %(day)s (days since the epoch), numbered from
-- %(first)s: three per message (two failed attempts, then the ack; every 10,000th message
-- dead-lettered instead), messages dealt over the %(groups)s groups, 20 kinds k0..k19 by
-- message (every 100,000th message of the rare kind "rare"), 8 workers; record n of the day
-- finishes at n / rows of the day (ids and times rise together, as settlements leave them).
INSERT INTO pgque_fifo.history
    (queue, message_id, group_id, kind, outcome, attempt, published_at, started_at,
     finished_at, worker, error)
SELECT %(queue)s::text, m, 'g' || lpad((m %% %(groups)s::integer + 1)::text, 7, '0'),
       CASE WHEN m %% 100000 = 0 THEN 'rare' ELSE 'k' || (m %% 20) END,
       CASE WHEN a < 3 THEN 'nacked' WHEN m %% 10000 = 0 THEN 'dead_lettered' ELSE 'acked' END,
       a, t - 1, t - 0.01,
       t, 'bench:' || (m %% 8), CASE WHEN a < 3 THEN 'TimeoutError: took too long' END
  FROM generate_series(%(first)s::bigint, %(first)s::bigint + %(rows)s::bigint - 1) AS n,
       LATERAL (SELECT n / 3 AS m, (n %% 3)::integer + 1 AS a,
                       %(day)s::float8 * 86400.0
                       + (n - %(first)s::bigint) * (86000.0 / %(rows)s::float8) AS t) AS at

-- name: dashboard_history_on
-- The case's queue keeps its history for 7 days.
SELECT pgque_fifo.pgque_set_history_v1(%(queue)s::text, true, 7 * 86400.0, NULL)

-- name: dashboard_days
-- Maintenance at a clock on day %(day)s: creates that day's partition and the next two.
SELECT pgque_fifo.pgque_history_maintain_v1(%(day)s::float8 * 86400.0 + 1)

-- name: dashboard_heartbeat
-- Worker %(worker_id)s of the queue (holder %(holder)s) heartbeats at %(now)s, every 5 s, with
-- 8 slots.
SELECT pgque_fifo.pgque_heartbeat_v1(
    %(queue)s::text, %(worker_id)s::text, %(holder)s::text, 'bench-host', %(pid)s::integer,
    '0.1.0', 8, 5.0, '[]', 3600.0, %(now)s::float8)

-- name: dashboard_analyze
VACUUM ANALYZE

-- name: server_now
SELECT extract(epoch FROM clock_timestamp())::float8
