-- Statements of benchmarks/scheduling.py, one per "-- name:" block (parsed by
-- pgque.postgres.named_sql). The fill writes the scheduled rows directly, as a million delayed
-- publishes would (ids from the messages' id sequence, due times a day or more ahead), in one
-- statement; the measured operations are pgque's own.

-- name: fill_scheduled
INSERT INTO pgque_fifo.scheduled (id, queue, group_id, event, priority, due_at, enqueued_at)
SELECT nextval(pg_get_serial_sequence('pgque_fifo.messages', 'id')), %(queue)s::text,
       'g' || (i %% 1000), %(event)s::text, 0, %(now)s::float8 + 86400 + i, %(now)s::float8
  FROM generate_series(1, %(n)s::integer) AS i

-- name: server_now
SELECT extract(epoch FROM clock_timestamp())::float8

-- name: statement_timeout
SELECT set_config('statement_timeout', %(timeout)s::text, false)

-- name: vacuum_scheduled
VACUUM ANALYZE pgque_fifo.scheduled

-- name: vacuum_messages
VACUUM ANALYZE pgque_fifo.messages

-- name: vacuum_groups
VACUUM ANALYZE pgque_fifo.groups
