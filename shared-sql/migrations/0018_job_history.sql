-- Migration 0018: job history (docs/history.md).
--
-- A queue whose history is on (a row in history_queues, set by the transport option history or
-- set_history) records every settled delivery, every head exhausted by max_attempts and every
-- redrive in pgque_fifo.history, partitioned by day of finished_at and kept bounded by
-- emptying whole partitions (pgque_history_maintain_v1; no lock a settlement waits for).
--   Tables: groups gets leased_at (when the lease was granted); new tables history_queues and
--   history (partitioned; history_default and the indexes history_queue, history_message,
--   history_group), sequence history_ids.
--   New entry points: pgque_set_history_v1, pgque_history_v1, pgque_history_maintain_v1;
--   helper pgque_history_add_v1.
--   Changed bodies: pgque_lease_group_v3 (leased_at; an exhausted head is recorded),
--   pgque_ack_v1, pgque_nack_v2, pgque_release_lease_v1, pgque_dead_letter_v2 and
--   pgque_unblock_v2 (record the settlement), pgque_redrive_in_place_v1 and
--   pgque_redrive_at_tail_v1 (record the redrive), pgque_purge_v1 (forgets the queue's
--   records) and pgque_setup_roles_v1 (the new entry points; the partitioned table changes
--   owner too, and its id sequence with it).
-- Adding a nullable column rewrites no table; the history tables start empty.

ALTER TABLE pgque_fifo.groups ADD COLUMN leased_at double precision;

-- Job history (docs/history.md; the functions are in 55_history.sql). One row per queue whose
-- history is on: its retention (keep_s seconds and/or max_rows records; at least one is set).
CREATE TABLE pgque_fifo.history_queues (
    queue    text COLLATE "C" PRIMARY KEY,
    keep_s   double precision CHECK (keep_s > 0),
    max_rows bigint CHECK (max_rows >= 1),
    CHECK (keep_s IS NOT NULL OR max_rows IS NOT NULL)
);

-- What happened to each message of those queues, partitioned by day of finished_at so that
-- pruning empties whole partitions (pgque_history_maintain_v1), never a big DELETE. The default
-- partition takes a record no day partition holds yet (maintenance creates them ahead). id
-- orders a queue's records (newer is larger: the paging cursor). fkey '' is the default key.
CREATE SEQUENCE pgque_fifo.history_ids;
CREATE TABLE pgque_fifo.history (
    id           bigint NOT NULL DEFAULT nextval('pgque_fifo.history_ids'),
    queue        text COLLATE "C" NOT NULL,
    message_id   bigint NOT NULL,
    group_id     text COLLATE "C" NOT NULL,
    kind         text NOT NULL,
    fkey         text COLLATE "C" NOT NULL DEFAULT '',
    outcome      text NOT NULL,
    attempt      integer NOT NULL,
    published_at double precision,
    started_at   double precision,
    finished_at  double precision NOT NULL,
    worker       text,
    error        text,
    reason       text
) PARTITION BY RANGE (finished_at);
-- The id sequence belongs to the table: it goes with it and changes owner with it.
ALTER SEQUENCE pgque_fifo.history_ids OWNED BY pgque_fifo.history.id;
CREATE TABLE pgque_fifo.history_default PARTITION OF pgque_fifo.history DEFAULT;
-- A queue's records newest first; a message's story; a group's records.
CREATE INDEX history_queue ON pgque_fifo.history (queue, id);
CREATE INDEX history_message ON pgque_fifo.history (queue, message_id, id);
CREATE INDEX history_group ON pgque_fifo.history (queue, group_id, id);

-- Record one settlement of message p_message_id, still in its group p_group_id (called by the
-- settling functions before the message leaves or changes): its kind, key, attempts and join
-- time from the rows, the lease's start and holder from the group when p_leased. A dead letter
-- without p_error records the message's last error. Nothing when the queue's history is off.
-- Reads the rows the caller holds; inserts one row (no lock beyond the insert's own).
CREATE FUNCTION pgque_fifo.pgque_history_add_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_outcome text, p_leased boolean,
    p_error text, p_reason text, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.history_queues q WHERE q.queue = p_queue) THEN
        RETURN;
    END IF;
    INSERT INTO pgque_fifo.history
        (queue, message_id, group_id, kind, fkey, outcome, attempt, published_at, started_at,
         finished_at, worker, error, reason)
    SELECT p_queue, m.id, p_group_id, COALESCE(m.event::json ->> 'kind', ''), g.fkey, p_outcome,
           m.attempts, m.enqueued_at, CASE WHEN p_leased THEN g.leased_at END, p_now,
           CASE WHEN p_leased THEN g.holder END,
           COALESCE(p_error, CASE WHEN p_outcome IN ('dead_lettered', 'exhausted')
                                  THEN m.last_error END),
           p_reason
      FROM pgque_fifo.messages m
      JOIN pgque_fifo.groups g ON g.queue = p_queue AND g.group_id = p_group_id
     WHERE m.id = p_message_id;
END
$$;

-- Turn the queue's history on with a retention (p_keep_s seconds and/or p_max_rows records), or
-- off (p_on false: the row goes, the records stay). Upserts or deletes one history_queues row.
CREATE FUNCTION pgque_fifo.pgque_set_history_v1(
    p_queue text, p_on boolean, p_keep_s double precision, p_max_rows bigint)
RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    IF NOT p_on THEN
        DELETE FROM pgque_fifo.history_queues q WHERE q.queue = p_queue;
        RETURN;
    END IF;
    INSERT INTO pgque_fifo.history_queues (queue, keep_s, max_rows)
    VALUES (p_queue, p_keep_s, p_max_rows)
    ON CONFLICT (queue) DO UPDATE SET keep_s = EXCLUDED.keep_s, max_rows = EXCLUDED.max_rows;
END
$$;

-- Up to p_limit records of the queue newest first (id below p_after when given), matching every
-- filter given, none finished before p_since nor older than the queue's retention (keep_s) at
-- p_now. One static query per access path: a message's story (history_message), a group's
-- records (history_group), else the queue's (history_queue); each an index walk backwards.
CREATE FUNCTION pgque_fifo.pgque_history_v1(
    p_queue text, p_group_id text, p_kind text, p_since double precision, p_outcome text,
    p_message_id bigint, p_limit integer, p_after bigint, p_now double precision)
RETURNS TABLE (id bigint, message_id bigint, group_id text, kind text, fkey text,
               outcome text, attempt integer, published_at double precision,
               started_at double precision, finished_at double precision, worker text,
               error text, reason text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_from double precision := COALESCE(p_since, '-Infinity');
    v_before bigint := COALESCE(p_after, 9223372036854775807);
    v_keep double precision;
BEGIN
    SELECT q.keep_s INTO v_keep FROM pgque_fifo.history_queues q WHERE q.queue = p_queue;
    IF v_keep IS NOT NULL THEN
        v_from := greatest(v_from, v_now - v_keep);
    END IF;
    IF p_message_id IS NOT NULL THEN
        RETURN QUERY
            SELECT h.id, h.message_id, h.group_id, h.kind, h.fkey, h.outcome, h.attempt,
                   h.published_at, h.started_at, h.finished_at, h.worker, h.error, h.reason
              FROM pgque_fifo.history h
             WHERE h.queue = p_queue AND h.message_id = p_message_id AND h.id < v_before
               AND h.finished_at >= v_from
               AND (p_group_id IS NULL OR h.group_id = p_group_id)
               AND (p_kind IS NULL OR h.kind = p_kind)
               AND (p_outcome IS NULL OR h.outcome = p_outcome)
             ORDER BY h.id DESC
             LIMIT p_limit;
    ELSIF p_group_id IS NOT NULL THEN
        RETURN QUERY
            SELECT h.id, h.message_id, h.group_id, h.kind, h.fkey, h.outcome, h.attempt,
                   h.published_at, h.started_at, h.finished_at, h.worker, h.error, h.reason
              FROM pgque_fifo.history h
             WHERE h.queue = p_queue AND h.group_id = p_group_id AND h.id < v_before
               AND h.finished_at >= v_from
               AND (p_kind IS NULL OR h.kind = p_kind)
               AND (p_outcome IS NULL OR h.outcome = p_outcome)
             ORDER BY h.id DESC
             LIMIT p_limit;
    ELSE
        RETURN QUERY
            SELECT h.id, h.message_id, h.group_id, h.kind, h.fkey, h.outcome, h.attempt,
                   h.published_at, h.started_at, h.finished_at, h.worker, h.error, h.reason
              FROM pgque_fifo.history h
             WHERE h.queue = p_queue AND h.id < v_before
               AND h.finished_at >= v_from
               AND (p_kind IS NULL OR h.kind = p_kind)
               AND (p_outcome IS NULL OR h.outcome = p_outcome)
             ORDER BY h.id DESC
             LIMIT p_limit;
    END IF;
END
$$;

-- Keep the history table's day partitions: while some queue's history is on, create today's
-- and the next two days' (a record of a day without one lands in history_default); and prune,
-- oldest first, each past day that every queue with records in it lets go (records all older
-- than the queue's keep_s, or at least max_rows newer records of the queue after them) by
-- emptying it with TRUNCATE; the emptied days are dropped together once a month's worth has
-- gathered. A queue whose history is off constrains nothing. Returns how many days were
-- pruned. No step takes a lock that a settlement waits for, except the monthly DROP, whose
-- wait is cut at 5 ms. DDL waits for its locks at most lock_timeout: what cannot be done now
-- is done next time. Partition names are built from day numbers only, never from user text.
CREATE FUNCTION pgque_fifo.pgque_history_maintain_v1(p_now double precision)
RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp
SET lock_timeout = '200ms' AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_today bigint := floor(v_now / 86400)::bigint;
    v_day bigint;
    v_part record;
    v_q record;
    v_last bigint;
    v_newer bigint;
    v_keep boolean;
    v_full boolean;
    v_pruned integer := 0;
    v_empty text[] := '{}';
    v_name text;
BEGIN
    FOR v_day IN v_today .. v_today + 2 LOOP
        EXIT WHEN NOT EXISTS (SELECT 1 FROM pgque_fifo.history_queues);
        IF to_regclass(format('pgque_fifo.history_d%s', v_day)) IS NULL THEN
            -- A table of its own, then attached: ATTACH takes the parent's SHARE UPDATE
            -- EXCLUSIVE lock, which no settlement (ROW EXCLUSIVE) waits for; CREATE TABLE ...
            -- PARTITION OF would take ACCESS EXCLUSIVE and queue every settlement behind it.
            BEGIN
                EXECUTE format('CREATE TABLE pgque_fifo.%I (LIKE pgque_fifo.history'
                               ' INCLUDING DEFAULTS, CHECK (finished_at >= %L AND'
                               ' finished_at < %L))',
                               'history_d' || v_day, v_day * 86400, (v_day + 1) * 86400);
                EXECUTE format('ALTER TABLE pgque_fifo.history ATTACH PARTITION pgque_fifo.%I'
                               ' FOR VALUES FROM (%L) TO (%L)',
                               'history_d' || v_day, v_day * 86400, (v_day + 1) * 86400);
            EXCEPTION WHEN lock_not_available OR check_violation OR duplicate_table THEN
                NULL;
            END;
        END IF;
    END LOOP;
    FOR v_part IN
        SELECT c.relname AS name, substr(c.relname, 10)::bigint AS day
          FROM pg_catalog.pg_inherits i
          JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'pgque_fifo.history'::regclass
           AND c.relname ~ '^history_d[0-9]+$'
         ORDER BY 2
    LOOP
        EXIT WHEN v_part.day >= v_today;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgque_fifo.%I)', v_part.name) INTO v_full;
        IF NOT v_full THEN
            v_empty := v_empty || v_part.name::text;
            CONTINUE;
        END IF;
        v_keep := false;
        FOR v_q IN SELECT q.queue, q.keep_s, q.max_rows FROM pgque_fifo.history_queues q
                    ORDER BY q.queue LOOP
            EXECUTE format('SELECT max(h.id) FROM pgque_fifo.%I h WHERE h.queue = $1',
                           v_part.name)
               INTO v_last USING v_q.queue;
            CONTINUE WHEN v_last IS NULL;
            CONTINUE WHEN v_q.keep_s IS NOT NULL
                      AND (v_part.day + 1) * 86400 <= v_now - v_q.keep_s;
            IF v_q.max_rows IS NOT NULL THEN
                SELECT count(*) INTO v_newer
                  FROM (SELECT 1 FROM pgque_fifo.history h
                         WHERE h.queue = v_q.queue AND h.id > v_last
                         LIMIT v_q.max_rows) AS newer;
                CONTINUE WHEN v_newer >= v_q.max_rows;
            END IF;
            v_keep := true;
            EXIT;
        END LOOP;
        EXIT WHEN v_keep;
        -- Prune the day: TRUNCATE locks that partition alone (settlements write today's and
        -- never wait for it), and its files go with it.
        BEGIN
            EXECUTE format('TRUNCATE pgque_fifo.%I', v_part.name);
            v_pruned := v_pruned + 1;
        EXCEPTION WHEN lock_not_available THEN
            EXIT;
        END;
    END LOOP;
    -- The emptied days go once 31 have gathered, in one DROP: a DROP needs the parent's
    -- ACCESS EXCLUSIVE lock, which queues every settlement behind it while it waits, so the
    -- wait is cut at 5 ms (a later run tries again) and happens about once a month.
    IF cardinality(v_empty) >= 31 THEN
        BEGIN
            PERFORM set_config('lock_timeout', '5ms', true);
            FOREACH v_name IN ARRAY v_empty LOOP  -- the first takes the lock for them all
                EXECUTE format('DROP TABLE pgque_fifo.%I', v_name);
            END LOOP;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END IF;
    RETURN v_pruned;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_lease_group_v3(
    p_queue text, p_group_id text, p_visibility double precision, p_max_attempts integer,
    p_on_exhausted text, p_min_priority integer, p_holder text, p_now double precision)
RETURNS TABLE (group_id text, message_id bigint, event text, token text, priority integer,
               attempt integer, expires_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_paused boolean;
    v_drained boolean;
    v_id bigint;
    v_event text;
    v_attempts integer;
    v_head_priority smallint;
    v_head_key text;
    v_token text;
    v_priority smallint;
BEGIN
    LOOP
        SELECT g.paused, g.drained, h.id, h.event, h.attempts, h.priority, h.fkey
          INTO v_paused, v_drained, v_id, v_event, v_attempts, v_head_priority, v_head_key
          FROM pgque_fifo.groups g
          LEFT JOIN LATERAL (
              SELECT m.id, m.event, m.attempts, m.priority, m.fkey FROM pgque_fifo.messages m
               WHERE m.queue = g.queue AND m.group_id = g.group_id
               ORDER BY COALESCE(m.seq, m.id)
               LIMIT 1) AS h ON true
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
        IF v_paused THEN
            RETURN;
        END IF;
        IF v_id IS NULL THEN
            PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, p_now);
            RETURN;
        END IF;
        IF v_drained THEN
            UPDATE pgque_fifo.groups g
               SET drained = false, priority = v_head_priority, fkey = v_head_key
             WHERE g.queue = p_queue AND g.group_id = p_group_id;
            IF v_head_priority < p_min_priority THEN
                RETURN;
            END IF;
        END IF;
        IF p_max_attempts IS NOT NULL AND v_attempts >= p_max_attempts THEN
            IF p_on_exhausted = 'block' THEN
                UPDATE pgque_fifo.groups g
                   SET blocked = true, token = NULL, leased_id = NULL, holder = NULL
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
                RETURN;
            END IF;
            PERFORM pgque_fifo.pgque_history_add_v1(
                p_queue, p_group_id, v_id, 'exhausted', false, NULL,
                format('max_attempts (%s) exhausted', p_max_attempts), p_now);
            PERFORM pgque_fifo.pgque_bury_v2(
                p_queue, p_group_id, v_id, format('max_attempts (%s) exhausted', p_max_attempts),
                NULL, p_now);
            CONTINUE;
        END IF;
        UPDATE pgque_fifo.messages m SET attempts = m.attempts + 1 WHERE m.id = v_id;
        v_token := replace(gen_random_uuid()::text, '-', '');
        UPDATE pgque_fifo.groups g
           SET token = v_token, leased_id = v_id, holder = p_holder,
               until = p_now + p_visibility, leased_at = p_now
         WHERE g.queue = p_queue AND g.group_id = p_group_id
        RETURNING g.priority INTO v_priority;
        group_id := p_group_id;
        message_id := v_id;
        event := v_event;
        token := v_token;
        priority := v_priority;
        attempt := v_attempts + 1;
        expires_at := p_now + p_visibility;
        RETURN NEXT;
        RETURN;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_ack_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    PERFORM pgque_fifo.pgque_history_add_v1(
        p_queue, p_group_id, p_message_id, 'acked', true, NULL, NULL, v_now);
    DELETE FROM pgque_fifo.messages m WHERE m.id = p_message_id;
    PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_nack_v2(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_delay double precision,
    p_error text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_error text := pgque_fifo.pgque_error_at_v1(p_error, v_now);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    IF v_error IS NOT NULL THEN
        UPDATE pgque_fifo.messages m SET last_error = v_error WHERE m.id = p_message_id;
    END IF;
    PERFORM pgque_fifo.pgque_history_add_v1(
        p_queue, p_group_id, p_message_id, 'nacked', true, v_error, NULL, v_now);
    UPDATE pgque_fifo.groups g
       SET token = NULL, leased_id = NULL, holder = NULL, until = v_now + p_delay
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    IF p_delay <= 0 THEN
        -- Claimable again now: wake an idle worker.
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_release_lease_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    PERFORM pgque_fifo.pgque_history_add_v1(
        p_queue, p_group_id, p_message_id, 'released', true, NULL, NULL, v_now);
    UPDATE pgque_fifo.messages m SET attempts = greatest(m.attempts - 1, 0)
     WHERE m.id = p_message_id;
    UPDATE pgque_fifo.groups g
       SET token = NULL, leased_id = NULL, holder = NULL, until = v_now
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_dead_letter_v2(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_reason text,
    p_error text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_error text := pgque_fifo.pgque_error_at_v1(p_error, v_now);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    PERFORM pgque_fifo.pgque_history_add_v1(
        p_queue, p_group_id, p_message_id, 'dead_lettered', true, v_error, p_reason, v_now);
    PERFORM pgque_fifo.pgque_bury_v2(p_queue, p_group_id, p_message_id, p_reason, v_error, v_now);
    PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_unblock_v2(
    p_queue text, p_group_id text, p_drop_head boolean, p_head bigint, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_blocked boolean;
    v_head bigint;
BEGIN
    SELECT g.blocked INTO v_blocked FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT v_blocked THEN
        RETURN false;
    END IF;
    SELECT m.id INTO v_head FROM pgque_fifo.messages m
     WHERE m.queue = p_queue AND m.group_id = p_group_id
     ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
    IF p_head IS NOT NULL AND v_head IS DISTINCT FROM p_head THEN
        RETURN false;
    END IF;
    UPDATE pgque_fifo.groups g SET blocked = false
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    IF p_drop_head THEN
        IF v_head IS NOT NULL THEN
            PERFORM pgque_fifo.pgque_history_add_v1(
                p_queue, p_group_id, v_head, 'dead_lettered', false, NULL,
                'dropped by operator (unblock)', v_now);
            PERFORM pgque_fifo.pgque_bury_v2(p_queue, p_group_id, v_head,
                                             'dropped by operator (unblock)', NULL, v_now);
        END IF;
        PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    ELSE
        UPDATE pgque_fifo.messages m SET attempts = 0 WHERE m.id = v_head;
        UPDATE pgque_fifo.groups g
           SET token = NULL, leased_id = NULL, holder = NULL, until = v_now
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
    END IF;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_redrive_in_place_v1(
    p_queue text, p_ids bigint[], p_now double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_groups text[] := '{}';
    v_created text[] := '{}';
    v_ids bigint[];
    v_count integer;
    v_row record;
    v_paused boolean;
    v_drained boolean;
    v_head_priority smallint;
    v_head_key text;
    v_first smallint;
BEGIN
    FOR v_row IN
        SELECT DISTINCT ON (d.group_id) d.group_id, d.priority FROM pgque_fifo.dead_letters d
         WHERE d.queue = p_queue AND (p_ids IS NULL OR d.id = ANY (p_ids))
         ORDER BY d.group_id, d.id
    LOOP
        -- The group's scheduled messages due by now joined it at their due times, before this
        -- redrive: they join first (pgque_join_due_v1), and a group the first of them made has
        -- its priority. A row created here for the dead letters alone is in v_created.
        v_first := NULL;
        SELECT s.priority INTO v_first FROM pgque_fifo.scheduled s
         WHERE s.queue = p_queue AND s.group_id = v_row.group_id AND s.due_at <= v_now
         ORDER BY s.due_at, s.id LIMIT 1;
        IF pgque_fifo.pgque_lock_group_v2(
               p_queue, v_row.group_id, COALESCE(v_first, v_row.priority)) THEN
            IF v_first IS NULL
               OR pgque_fifo.pgque_join_due_v1(p_queue, v_row.group_id, v_now, NULL) = 0 THEN
                v_created := v_created || v_row.group_id;
            END IF;
        ELSIF v_first IS NOT NULL THEN
            PERFORM pgque_fifo.pgque_join_due_v1(p_queue, v_row.group_id, v_now, NULL);
        END IF;
        v_groups := v_groups || v_row.group_id;
    END LOOP;
    IF cardinality(v_groups) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = ANY (v_groups)
     ORDER BY g.group_id
       FOR NO KEY UPDATE;
    v_ids := ARRAY(SELECT k.id FROM pgque_fifo.dead_letters k
                    WHERE k.queue = p_queue AND (p_ids IS NULL OR k.id = ANY (p_ids))
                      AND k.group_id = ANY (v_groups)
                    ORDER BY k.id
                      FOR UPDATE);
    -- A drained row is settled first, from the messages it has now (none of ours yet): with
    -- messages it is the group their first publish made (that message's priority); paused and
    -- empty it is a paused group whose priority stays; else it is no group and the redrive
    -- creates it, never served, with its first dead letter's priority. A row this redrive
    -- created takes the priority of the first dead letter it receives (the one it was created
    -- for may have gone elsewhere meanwhile).
    FOR v_row IN
        SELECT DISTINCT ON (d.group_id) d.group_id, d.priority, d.fkey
          FROM pgque_fifo.dead_letters d
         WHERE d.id = ANY (v_ids)
         ORDER BY d.group_id, d.id
    LOOP
        SELECT g.paused, g.drained INTO v_paused, v_drained FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
        IF v_row.group_id = ANY (v_created) THEN
            UPDATE pgque_fifo.groups g SET priority = v_row.priority, fkey = v_row.fkey
             WHERE g.queue = p_queue AND g.group_id = v_row.group_id
               AND (g.priority <> v_row.priority OR g.fkey <> v_row.fkey);
        ELSIF v_drained THEN
            SELECT m.priority, m.fkey INTO v_head_priority, v_head_key FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND m.group_id = v_row.group_id
             ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
            IF FOUND THEN
                UPDATE pgque_fifo.groups g
                   SET drained = false, priority = v_head_priority, fkey = v_head_key
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            ELSIF v_paused THEN
                UPDATE pgque_fifo.groups g SET drained = false
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            ELSE
                UPDATE pgque_fifo.groups g
                   SET drained = false, priority = v_row.priority, until = NULL, token = NULL,
                       leased_id = NULL, holder = NULL, blocked = false, fkey = v_row.fkey
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            END IF;
        END IF;
    END LOOP;
    WITH src AS (
        SELECT DISTINCT ON (d.message_id) d.id, d.message_id, d.group_id, d.event, d.priority,
               d.seq, d.fkey
          FROM pgque_fifo.dead_letters d
         WHERE d.id = ANY (v_ids)
         ORDER BY d.message_id, d.id
    ),
    -- The original id and position; a message that somehow still exists keeps its dead letter.
    inserted AS (
        INSERT INTO pgque_fifo.messages
            (id, queue, group_id, event, attempts, enqueued_at, priority, last_error, seq, fkey)
        OVERRIDING SYSTEM VALUE
        SELECT s.message_id, p_queue, s.group_id, s.event, 0, v_now, s.priority, NULL, s.seq,
               s.fkey
          FROM src s
         ORDER BY s.message_id
        ON CONFLICT (id) DO NOTHING
        RETURNING id
    ),
    gone AS (
        DELETE FROM pgque_fifo.dead_letters d
         USING src s, inserted i
         WHERE d.id = s.id AND i.id = s.message_id
        RETURNING d.id, d.message_id, d.group_id, d.event, d.fkey, d.attempts, d.enqueued_at,
                  d.error, d.reason
    ),
    recorded AS (
        INSERT INTO pgque_fifo.history
            (queue, message_id, group_id, kind, fkey, outcome, attempt, published_at,
             finished_at, error, reason)
        SELECT p_queue, g.message_id, g.group_id, COALESCE(g.event::json ->> 'kind', ''),
               g.fkey, 'redriven', g.attempts, g.enqueued_at, v_now, g.error, g.reason
          FROM gone g
         WHERE EXISTS (SELECT 1 FROM pgque_fifo.history_queues q WHERE q.queue = p_queue)
         ORDER BY g.id
    )
    SELECT count(*) INTO v_count FROM gone;
    DELETE FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = ANY (v_groups) AND NOT g.paused
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = g.queue AND m.group_id = g.group_id);
    IF v_count > 0 THEN
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_redrive_at_tail_v1(
    p_queue text, p_ids bigint[], p_now double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_count integer;
    v_groups text[] := '{}';
    v_got text[];
    v_first_ids bigint[];
    v_first_priorities smallint[];
    v_first_keys text[];
    v_row record;
BEGIN
    FOR v_row IN
        SELECT DISTINCT ON (d.group_id) d.group_id, d.priority FROM pgque_fifo.dead_letters d
         WHERE d.queue = p_queue AND (p_ids IS NULL OR d.id = ANY (p_ids))
         ORDER BY d.group_id, d.id
    LOOP
        -- Scheduled messages due by now join the tail before the dead letters do.
        PERFORM pgque_fifo.pgque_lock_join_v1(p_queue, v_row.group_id, v_row.priority, v_now);
        v_groups := v_groups || v_row.group_id;
    END LOOP;
    IF cardinality(v_groups) = 0 THEN
        RETURN 0;
    END IF;
    WITH taken AS (
        DELETE FROM pgque_fifo.dead_letters d
         WHERE d.id IN (SELECT k.id FROM pgque_fifo.dead_letters k
                         WHERE k.queue = p_queue AND (p_ids IS NULL OR k.id = ANY (p_ids))
                           AND k.group_id = ANY (v_groups)
                         ORDER BY k.id
                           FOR UPDATE)
        RETURNING d.id, d.group_id, d.event, d.priority, d.fkey, d.message_id, d.attempts,
                  d.enqueued_at, d.error, d.reason
    ),
    recorded AS (
        INSERT INTO pgque_fifo.history
            (queue, message_id, group_id, kind, fkey, outcome, attempt, published_at,
             finished_at, error, reason)
        SELECT p_queue, t.message_id, t.group_id, COALESCE(t.event::json ->> 'kind', ''),
               t.fkey, 'redriven', t.attempts, t.enqueued_at, v_now, t.error, t.reason
          FROM taken t
         WHERE EXISTS (SELECT 1 FROM pgque_fifo.history_queues q WHERE q.queue = p_queue)
         ORDER BY t.id
    ),
    -- Identity values are drawn as rows are produced: message ids follow dead-letter ids.
    inserted AS (
        INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority, fkey)
        SELECT p_queue, t.group_id, t.event, v_now, t.priority, t.fkey FROM taken t ORDER BY t.id
        RETURNING id, group_id, priority, fkey
    ),
    firsts AS (
        SELECT DISTINCT ON (i.group_id) i.group_id, i.id, i.priority, i.fkey FROM inserted i
         ORDER BY i.group_id, i.id
    )
    SELECT (SELECT count(*) FROM inserted), COALESCE(array_agg(f.group_id), '{}'),
           array_agg(f.id), array_agg(f.priority), array_agg(f.fkey)
      INTO v_count, v_got, v_first_ids, v_first_priorities, v_first_keys
      FROM firsts f;
    IF cardinality(v_got) < cardinality(v_groups) THEN
        DELETE FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = ANY (v_groups) AND g.group_id <> ALL (v_got)
           AND NOT g.paused
           AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                            WHERE m.queue = g.queue AND m.group_id = g.group_id);
    END IF;
    UPDATE pgque_fifo.groups g SET priority = f.priority, fkey = f.fkey
      FROM unnest(v_got, v_first_ids, v_first_priorities, v_first_keys)
           AS f(group_id, id, priority, fkey)
     WHERE g.queue = p_queue AND g.group_id = f.group_id
       AND (g.priority <> f.priority OR g.fkey <> f.fkey)
       AND NOT g.drained
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = f.group_id
                          AND COALESCE(m.seq, m.id) < f.id);
    IF v_count > 0 THEN
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_purge_v1(p_queue text)
RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_groups text[];
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_queue, 70677176));
    v_groups := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                       WHERE g.queue = p_queue
                       ORDER BY g.group_id
                         FOR UPDATE);
    -- Then the queue's fairness clock row (a keyed claim holding it waits for no group row:
    -- it takes them SKIP LOCKED), so no keyed claim runs through the rest.
    PERFORM 1 FROM pgque_fifo.fair_queues q WHERE q.queue = p_queue FOR UPDATE;
    DELETE FROM pgque_fifo.messages m
     USING unnest(v_groups) AS u(group_id)
     WHERE m.queue = p_queue AND m.group_id = u.group_id;
    DELETE FROM pgque_fifo.groups g WHERE g.queue = p_queue AND g.group_id = ANY (v_groups);
    DELETE FROM pgque_fifo.messages m
     WHERE m.queue = p_queue
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.groups g
                        WHERE g.queue = m.queue AND g.group_id = m.group_id);
    DELETE FROM pgque_fifo.dead_letters d
     WHERE d.id IN (SELECT k.id FROM pgque_fifo.dead_letters k
                     WHERE k.queue = p_queue
                     ORDER BY k.id
                       FOR UPDATE);
    DELETE FROM pgque_fifo.scheduled s
     WHERE s.id IN (SELECT k.id FROM pgque_fifo.scheduled k
                     WHERE k.queue = p_queue
                     ORDER BY k.id
                       FOR UPDATE);
    DELETE FROM pgque_fifo.ticks t WHERE t.queue = p_queue;
    -- So do the queue's history records (its history setting stays: configuration).
    DELETE FROM pgque_fifo.history h WHERE h.queue = p_queue;
    -- The keys' claim history goes; the policies stay (configuration), and so does the clock.
    DELETE FROM pgque_fifo.fair_keys k WHERE k.queue = p_queue AND k.fkey <> '';
    UPDATE pgque_fifo.fair_keys k SET finish = 0, tokens = NULL, tokens_at = NULL
     WHERE k.queue = p_queue;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_setup_roles_v1(
    p_producer text DEFAULT 'pgque_producer', p_worker text DEFAULT 'pgque_worker',
    p_admin text DEFAULT 'pgque_admin')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_role text;
    v_rel regclass;
    v_fn regprocedure;
    v_producer_fns text[] := ARRAY['pgque_publish_v2', 'pgque_publish_many_v2',
                                   'pgque_publish_dedup_v1', 'pgque_partition_slots_v1',
                                   'pgque_schedule_v2', 'pgque_schedule_many_v2',
                                   'pgque_cancel_v1', 'pgque_scheduled_v1',
                                   'pgque_publish_tick_v2', 'pgque_last_tick_v1'];
    v_worker_fns text[] := ARRAY['pgque_claim_v2', 'pgque_ack_v1', 'pgque_ack_many_v1',
                                 'pgque_nack_v2', 'pgque_release_lease_v1', 'pgque_extend_v1',
                                 'pgque_dead_letter_v2', 'pgque_settle_claim_v1',
                                 'pgque_stats_v3', 'pgque_next_due_v1',
                                 'pgque_channel_v1', 'pgque_partition_slots_v1',
                                 'pgque_set_history_v1', 'pgque_history_maintain_v1'];
BEGIN
    IF p_producer IS NULL OR p_worker IS NULL OR p_admin IS NULL
       OR cardinality(ARRAY(SELECT DISTINCT r FROM unnest(ARRAY[p_producer, p_worker, p_admin])
                            AS u(r))) <> 3 THEN
        RAISE EXCEPTION 'pgque: the producer, worker and admin roles must be three distinct names';
    END IF;
    FOREACH v_role IN ARRAY ARRAY[p_producer, p_worker, p_admin] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = v_role) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
        END IF;
    END LOOP;
    EXECUTE format('ALTER SCHEMA pgque_fifo OWNER TO %I', p_admin);
    FOR v_rel IN SELECT c.oid::regclass FROM pg_catalog.pg_class c
                  WHERE c.relnamespace = 'pgque_fifo'::regnamespace
                    AND c.relkind IN ('r', 'v', 'p')
                  ORDER BY c.oid LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO %I', v_rel, p_admin);
    END LOOP;
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn, p_admin);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
    REVOKE ALL ON SCHEMA pgque_fifo FROM PUBLIC;
    EXECUTE format('GRANT USAGE ON SCHEMA pgque_fifo TO %I, %I', p_producer, p_worker);
    EXECUTE format('GRANT SELECT ON pgque_fifo.schema_version TO %I, %I', p_producer, p_worker);
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                   AND p.proname = ANY (v_producer_fns) ORDER BY p.oid LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn, p_producer);
    END LOOP;
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                   AND p.proname = ANY (v_worker_fns) ORDER BY p.oid LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn, p_worker);
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION pgque_fifo.pgque_history_add_v1(
    text, text, bigint, text, boolean, text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_set_history_v1(
    text, boolean, double precision, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_history_v1(
    text, text, text, double precision, text, bigint, integer, bigint, double precision)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_history_maintain_v1(double precision) FROM PUBLIC;

-- Roles set up before this migration keep working without a second role setup (as in
-- migration 0017): where roles exist, the new tables and functions go to the owner of the
-- older entry points (the admin role), and each worker role (one that may call
-- pgque_claim_v2) gets the history setting and upkeep. A database without roles is left as it
-- is.
DO $$
DECLARE
    v_admin name;
    v_fn regprocedure;
    v_rel regclass;
    v_role name;
BEGIN
    SELECT r.rolname INTO v_admin
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
     WHERE p.oid = 'pgque_fifo.pgque_claim_v2(text, integer, double precision, integer,'
                   ' integer, text, text, double precision)'::regprocedure;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace = 'pgque_fifo'::regnamespace
           AND p.proname IN ('pgque_claim_v2', 'pgque_publish_v2')
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    ) THEN
        RETURN;
    END IF;
    FOREACH v_rel IN ARRAY ARRAY['pgque_fifo.history_queues'::regclass,
                                 'pgque_fifo.history'::regclass,
                                 'pgque_fifo.history_default'::regclass] LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO %I', v_rel, v_admin);
    END LOOP;
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace AND r.rolname <> v_admin
                 ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn, v_admin);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
    FOR v_role IN SELECT DISTINCT r.rolname FROM pg_catalog.pg_proc p,
                         LATERAL pg_catalog.aclexplode(p.proacl) a
                         JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
                   WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                     AND p.proname = 'pgque_claim_v2' AND a.privilege_type = 'EXECUTE'
                     AND a.grantee <> p.proowner
                   ORDER BY 1 LOOP
        FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                     WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                       AND p.proname IN ('pgque_set_history_v1', 'pgque_history_maintain_v1')
                     ORDER BY p.oid LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn, v_role);
        END LOOP;
    END LOOP;
END
$$;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (18, 'job history');
