-- The statements pgque's Python code sends, one per "-- name:" block, loaded by name.
-- Each transport operation is one of these: one statement, one round trip. Parameters are
-- bound (%(name)s), cast to the exact argument types so function resolution never guesses.
-- Arrays are bound in binary (%(name)b): psycopg then sends each element as it is instead of
-- quoting it into an array literal (publish_many of 1,000 items: about 1.8x the rate).

-- name: install_lock
-- Serialise concurrent installs/migrations (transaction-scoped, so poolers are fine).
SELECT pg_advisory_xact_lock(7067717565)

-- name: schema_exists
SELECT to_regclass('pgque_fifo.schema_version') IS NOT NULL

-- name: schema_version
SELECT max(version) FROM pgque_fifo.schema_version

-- name: schema_versions
SELECT version FROM pgque_fifo.schema_version

-- name: setup_roles
-- The roles producer, worker and admin (least privilege; an explicit admin step).
SELECT pgque_fifo.pgque_setup_roles_v1(%(producer)s::text, %(worker)s::text, %(admin)s::text)

-- name: publish
SELECT pgque_fifo.pgque_publish_v2(%(queue)s::text, %(group_id)s::text, %(event)s::text,
                                   %(priority)s::integer, %(fkey)s::text,
                                   %(now)s::double precision)

-- name: publish_many
SELECT pgque_fifo.pgque_publish_many_v2(%(queue)s::text, %(group_ids)b::text[],
                                        %(events)b::text[], %(priority)s::integer,
                                        %(fkey)s::text, %(now)s::double precision)

-- name: schedule
-- A publish with a delay (> 0): scheduled, joins the group's tail when due.
SELECT pgque_fifo.pgque_schedule_v2(%(queue)s::text, %(group_id)s::text, %(event)s::text,
                                    %(priority)s::integer, %(delay)s::double precision,
                                    %(fkey)s::text, %(now)s::double precision)

-- name: schedule_many
SELECT pgque_fifo.pgque_schedule_many_v2(%(queue)s::text, %(group_ids)b::text[],
                                         %(events)b::text[], %(priority)s::integer,
                                         %(delay)s::double precision, %(fkey)s::text,
                                         %(now)s::double precision)

-- name: cancel
SELECT pgque_fifo.pgque_cancel_v1(%(queue)s::text, %(message_id)s::bigint,
                                  %(now)s::double precision)

-- name: scheduled
SELECT id, group_id, due_at, event, priority, enqueued_at
  FROM pgque_fifo.pgque_scheduled_v1(%(queue)s::text, %(limit)s::integer, %(after)s::bigint,
                                     %(now)s::double precision)

-- name: publish_tick
SELECT pgque_fifo.pgque_publish_tick_v2(%(queue)s::text, %(entry)s::text,
                                        %(tick)s::double precision, %(group_id)s::text,
                                        %(event)s::text, %(priority)s::integer,
                                        %(fkey)s::text, %(now)s::double precision)

-- name: last_tick
SELECT pgque_fifo.pgque_last_tick_v1(%(queue)s::text, %(entry)s::text)

-- name: next_due
-- Whether a scheduled message is due but not joined yet, and the seconds until the next one
-- falls due (NULL if none).
SELECT due_now, due_in FROM pgque_fifo.pgque_next_due_v1(%(queue)s::text, %(now)s::double precision)

-- name: claim
SELECT group_id, message_id, event, token, priority, attempt, expires_at
  FROM pgque_fifo.pgque_claim_v2(%(queue)s::text, %(n)s::integer,
                                 %(visibility)s::double precision, %(min_priority)s::integer,
                                 %(max_attempts)s::integer, %(on_exhausted)s::text,
                                 %(holder)s::text, %(now)s::double precision)

-- name: settle_claim
-- The first row carries the settlement results (settled), the others one lease each.
SELECT settled, group_id, message_id, event, token, priority, attempt, expires_at
  FROM pgque_fifo.pgque_settle_claim_v1(%(queue)s::text, %(outcomes)b::text[],
                                        %(group_ids)b::text[], %(message_ids)b::bigint[],
                                        %(tokens)b::text[], %(delays)b::double precision[],
                                        %(reasons)b::text[], %(errors)b::text[],
                                        %(n)s::integer, %(visibility)s::double precision,
                                        %(min_priority)s::integer, %(max_attempts)s::integer,
                                        %(on_exhausted)s::text, %(holders)b::text[],
                                        %(now)s::double precision)

-- name: ack
SELECT pgque_fifo.pgque_ack_v1(%(queue)s::text, %(group_id)s::text, %(message_id)s::bigint,
                               %(token)s::text, %(now)s::double precision)

-- name: ack_many
SELECT pgque_fifo.pgque_ack_many_v1(%(queue)s::text, %(group_ids)b::text[],
                                    %(message_ids)b::bigint[], %(tokens)b::text[],
                                    %(now)s::double precision)

-- name: nack
SELECT pgque_fifo.pgque_nack_v2(%(queue)s::text, %(group_id)s::text, %(message_id)s::bigint,
                                %(token)s::text, %(delay)s::double precision,
                                %(error)s::text, %(now)s::double precision)

-- name: release
SELECT pgque_fifo.pgque_release_lease_v1(%(queue)s::text, %(group_id)s::text,
                                         %(message_id)s::bigint, %(token)s::text,
                                         %(now)s::double precision)

-- name: extend
SELECT pgque_fifo.pgque_extend_v1(%(queue)s::text, %(group_id)s::text, %(message_id)s::bigint,
                                  %(token)s::text, %(visibility)s::double precision,
                                  %(now)s::double precision)

-- name: dead_letter
SELECT pgque_fifo.pgque_dead_letter_v2(%(queue)s::text, %(group_id)s::text,
                                       %(message_id)s::bigint, %(token)s::text,
                                       %(reason)s::text, %(error)s::text,
                                       %(now)s::double precision)

-- name: dead_letters
SELECT id, group_id, message_id, event, priority, attempts, reason, failed_at, error
  FROM pgque_fifo.pgque_dead_letters_v2(%(queue)s::text, %(limit)s::integer, %(after)s::bigint)

-- name: delete_dead_letters
SELECT pgque_fifo.pgque_delete_dead_letters_v1(%(queue)s::text, %(ids)s::bigint[])

-- name: redrive
SELECT pgque_fifo.pgque_redrive_v3(%(queue)s::text, %(ids)s::bigint[], %(in_place)s::boolean,
                                   %(retry_now)s::boolean, %(now)s::double precision)

-- name: pause
SELECT pgque_fifo.pgque_pause_v1(%(queue)s::text, %(group_id)s::text)

-- name: resume
SELECT pgque_fifo.pgque_resume_v2(%(queue)s::text, %(group_id)s::text,
                                 %(now)s::double precision)

-- name: group
-- The rows of the three group listings end with the group's fairness key (pgque_group_key_v1).
SELECT group_id, state, depth, priority, head_message_id, head_enqueued_at, head_attempts,
       lease_expires_at, lease_holder, resume_at, last_error,
       pgque_fifo.pgque_group_key_v1(%(queue)s::text, group_id)
  FROM pgque_fifo.pgque_group_v1(%(queue)s::text, %(group_id)s::text, %(now)s::double precision)

-- name: groups
SELECT group_id, state, depth, priority, head_message_id, head_enqueued_at, head_attempts,
       lease_expires_at, lease_holder, resume_at, last_error,
       pgque_fifo.pgque_group_key_v1(%(queue)s::text, group_id)
  FROM pgque_fifo.pgque_groups_v1(%(queue)s::text, %(state)s::text, %(limit)s::integer,
                                  %(after)s::text, %(now)s::double precision)

-- name: groups_prefixed
SELECT group_id, state, depth, priority, head_message_id, head_enqueued_at, head_attempts,
       lease_expires_at, lease_holder, resume_at, last_error,
       pgque_fifo.pgque_group_key_v1(%(queue)s::text, group_id)
  FROM pgque_fifo.pgque_groups_prefixed_v1(%(queue)s::text, %(state)s::text,
                                           %(limit)s::integer, %(after)s::text,
                                           %(prefix)s::text, %(now)s::double precision)

-- name: messages
-- Browse and search (56_browse.sql): a row with message_id NULL carries next_after.
SELECT message_id, group_id, event_id, kind, enqueued_at, is_head, attempts, size, preview,
       truncated, page_cursor
  FROM pgque_fifo.pgque_messages_v1(%(queue)s::text, %(group_id)s::text, %(kind)s::text,
                                    %(limit)s::integer, %(after)s::bigint,
                                    %(now)s::double precision)

-- name: message
SELECT message_id, group_id, event_id, kind, enqueued_at, due_at, is_head, attempts, size,
       preview, truncated
  FROM pgque_fifo.pgque_message_v1(%(queue)s::text, %(message_id)s::bigint,
                                   %(now)s::double precision)

-- name: group_scheduled
SELECT id, group_id, due_at, event, priority, enqueued_at
  FROM pgque_fifo.pgque_group_scheduled_v1(%(queue)s::text, %(group_id)s::text,
                                           %(limit)s::integer, %(after)s::bigint,
                                           %(now)s::double precision)

-- name: oldest_groups
SELECT group_id, state, depth, priority, head_message_id, head_enqueued_at, head_attempts,
       lease_expires_at, lease_holder, resume_at, last_error,
       pgque_fifo.pgque_group_key_v1(%(queue)s::text, group_id)
  FROM pgque_fifo.pgque_oldest_groups_v1(%(queue)s::text, %(state)s::text,
                                         %(limit)s::integer, %(now)s::double precision)

-- name: unblock
SELECT pgque_fifo.pgque_unblock_v2(%(queue)s::text, %(group_id)s::text, %(drop_head)s::boolean,
                                   %(head)s::bigint, %(now)s::double precision)

-- name: retry_now
SELECT pgque_fifo.pgque_retry_now_v1(%(queue)s::text, %(group_id)s::text,
                                     %(now)s::double precision)

-- name: stats
SELECT groups, messages, in_flight, parked, blocked, dead_letters, oldest_age_s, next_resume_at,
       paused, scheduled, next_due_at
  FROM pgque_fifo.pgque_stats_v3(%(queue)s::text, %(now)s::double precision)

-- name: queues
-- Every queue that holds groups, dead letters or scheduled messages, in byte order. A loose
-- index scan per table (one index probe per queue, not a read of every group): the primary key
-- of groups, dead_letters_queue and scheduled_due all lead with the queue.
WITH RECURSIVE g(queue) AS (
    SELECT min(queue) FROM pgque_fifo.groups
    UNION ALL
    SELECT (SELECT min(n.queue) FROM pgque_fifo.groups n WHERE n.queue > g.queue)
      FROM g WHERE g.queue IS NOT NULL
), d(queue) AS (
    SELECT min(queue) FROM pgque_fifo.dead_letters
    UNION ALL
    SELECT (SELECT min(n.queue) FROM pgque_fifo.dead_letters n WHERE n.queue > d.queue)
      FROM d WHERE d.queue IS NOT NULL
), s(queue) AS (
    SELECT min(queue) FROM pgque_fifo.scheduled
    UNION ALL
    SELECT (SELECT min(n.queue) FROM pgque_fifo.scheduled n WHERE n.queue > s.queue)
      FROM s WHERE s.queue IS NOT NULL
)
SELECT queue FROM g WHERE queue IS NOT NULL
UNION
SELECT queue FROM d WHERE queue IS NOT NULL
UNION
SELECT queue FROM s WHERE queue IS NOT NULL
ORDER BY 1

-- name: purge
SELECT pgque_fifo.pgque_purge_v1(%(queue)s::text)

-- name: table_health
-- Live and dead row versions of pgque's tables (for benchmarks and operators).
SELECT relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, n_tup_del,
       last_autovacuum, autovacuum_count
  FROM pg_stat_user_tables
 WHERE schemaname = 'pgque_fifo'
 ORDER BY relname

-- name: channel
-- The LISTEN/NOTIFY channel a queue's publishes notify (an identifier: LISTEN quotes it).
SELECT pgque_fifo.pgque_channel_v1(%(queue)s::text)

-- name: store_identity
-- Which store this is (Lease.origin): the cluster's system identifier and the database.
SELECT system_identifier::text || '/' || current_database() FROM pg_control_system()

-- name: server_time
-- The server's clock, the one that judges leases (a scheduler starts new entries from it).
SELECT extract(epoch FROM clock_timestamp())::double precision

-- name: set_key_policy
-- Fairness keys (docs/fairness.md): fkey NULL names the queue's default policy.
SELECT pgque_fifo.pgque_set_key_policy_v1(%(queue)s::text, %(fkey)s::text,
                                          %(weight)s::double precision,
                                          %(max_in_flight)s::integer,
                                          %(rate)s::double precision, %(per)s::double precision,
                                          %(burst)s::integer)

-- name: key_policy
SELECT weight, max_in_flight, rate, per, burst
  FROM pgque_fifo.pgque_key_policy_v1(%(queue)s::text, %(fkey)s::text)

-- name: delete_key_policy
SELECT pgque_fifo.pgque_delete_key_policy_v1(%(queue)s::text, %(fkey)s::text)

-- name: keys
SELECT fkey, own, weight, max_in_flight, rate, per, burst, in_flight, groups, messages,
       oldest_age_s, tokens, next_token_at
  FROM pgque_fifo.pgque_keys_v1(%(queue)s::text, %(limit)s::integer, %(after)s::text,
                                %(now)s::double precision)

-- name: key_info
SELECT fkey, own, weight, max_in_flight, rate, per, burst, in_flight, groups, messages,
       oldest_age_s, tokens, next_token_at
  FROM pgque_fifo.pgque_key_info_v1(%(queue)s::text, %(fkey)s::text, %(now)s::double precision)

-- name: set_history
-- Job history (docs/history.md): on with a retention, or off (on false).
SELECT pgque_fifo.pgque_set_history_v1(%(queue)s::text, %(on)s::boolean,
                                       %(keep_s)s::double precision, %(max_rows)s::bigint)

-- name: history
SELECT id, message_id, group_id, kind, fkey, outcome, attempt, published_at, started_at,
       finished_at, worker, error, reason
  FROM pgque_fifo.pgque_history_v1(%(queue)s::text, %(group_id)s::text, %(kind)s::text,
                                   %(since)s::double precision, %(outcome)s::text,
                                   %(message_id)s::bigint, %(limit)s::integer,
                                   %(after)s::bigint, %(now)s::double precision)

-- name: history_maintain
SELECT pgque_fifo.pgque_history_maintain_v1(%(now)s::double precision)

-- name: heartbeat
-- Live workers (docs/workers.md): register or refresh a worker's row.
SELECT pgque_fifo.pgque_heartbeat_v1(%(queue)s::text, %(worker_id)s::text, %(holder)s::text,
                                     %(host)s::text, %(pid)s::integer, %(version)s::text,
                                     %(concurrency)s::integer, %(every)s::double precision,
                                     %(slots)s::text, %(prune_s)s::double precision,
                                     %(now)s::double precision)

-- name: goodbye
SELECT pgque_fifo.pgque_goodbye_v1(%(queue)s::text, %(worker_id)s::text)

-- name: workers
SELECT worker_id, holder, host, pid, version, concurrency, heartbeat_every, slots, started_at,
       last_heartbeat, now_s, group_id, message_id, lease_holder, expires_at
  FROM pgque_fifo.pgque_workers_v1(%(queue)s::text, %(include_gone)s::boolean,
                                   %(alive_multiple)s::double precision,
                                   %(now)s::double precision)
