-- The statements of dashboard_pages.py, one per "-- name:" block.

-- name: fill_groups
-- One group row per id g0000001..gN: every 1,000th blocked (its head out of attempts), every
-- 997th paused, the rest ready; a ready group's until is a past time of last service.
INSERT INTO pgque_fifo.groups (queue, group_id, priority, until, blocked, paused)
SELECT %(queue)s, 'g' || lpad(i::text, 7, '0'), 0, %(now)s - i, i %% 1000 = 0, i %% 997 = 0
  FROM generate_series(1, %(n)s) AS i

-- name: fill_messages
-- One message per group, enqueued up to N seconds ago (older for higher ids: the oldest heads
-- are on the last page in id order).
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, attempts)
SELECT %(queue)s, 'g' || lpad(i::text, 7, '0'), %(event)s, %(now)s - i,
       CASE WHEN i %% 1000 = 0 THEN 10 ELSE 0 END
  FROM generate_series(1, %(n)s) AS i

-- name: fill_backlog_group
-- A stuck group ("a-stuck", first in id order) holding %(backlog)s messages, every one older
-- than every other group's head: the walk of oldest_groups reads them all before the others.
INSERT INTO pgque_fifo.groups (queue, group_id, priority, until)
SELECT %(queue)s, 'a-stuck', 0, %(now)s - 1 WHERE %(backlog)s > 0

-- name: fill_backlog_messages
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
SELECT %(queue)s, 'a-stuck', %(event)s, %(now)s - %(n)s - 1000 - %(backlog)s + j
  FROM generate_series(1, %(backlog)s) AS j

-- name: fill_dead_letters
INSERT INTO pgque_fifo.dead_letters
    (queue, group_id, message_id, event, priority, attempts, reason, enqueued_at, failed_at)
SELECT %(queue)s, 'dead-' || i, i, %(event)s, 0, 10, 'rejected', %(now)s - 60, %(now)s - 30
  FROM generate_series(1, 200) AS i

-- name: analyze_groups
VACUUM ANALYZE pgque_fifo.groups

-- name: analyze_messages
VACUUM ANALYZE pgque_fifo.messages

-- name: analyze_dead_letters
VACUUM ANALYZE pgque_fifo.dead_letters

-- name: server_now
SELECT extract(epoch FROM clock_timestamp())::float8
