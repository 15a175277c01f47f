-- Migration 0020: a keyed publish writes its new group's row once.
--
-- A publish made a new group's row under the default key '' and then gave it the publish's
-- key (pgque_key_join_v1): one more row version per new keyed group, whose entry in
-- groups_key lay in the range of the key '' until a vacuum. Every keyed claim of the queue
-- walks the key '' first (never charged, it is first in claim order), and read those dead
-- entries: at 1,000,000 groups under 10,000 keys the keyed claims ran at half the rate of
-- claims without keys until autovacuum had been through the table, and much slower while
-- something held the xmin horizon back. Now the row is inserted with its key.
--   New helpers: pgque_lock_group_v3 (pgque_lock_group_v2 with the key of a row it creates)
--   and pgque_lock_join_v2 (pgque_lock_join_v1 likewise); the old ones are dropped.
--   Changed bodies: pgque_publish_v2 and pgque_publish_many_v2 (create the row with the
--   publish's key), pgque_redrive_in_place_v1 and pgque_redrive_at_tail_v1 (call the new
--   helpers; a row they create still starts under '' and takes its dead letter's key as
--   before).
-- No table changes.

CREATE FUNCTION pgque_fifo.pgque_lock_group_v3(
    p_queue text, p_group_id text, p_priority integer, p_fkey text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    PERFORM pg_advisory_xact_lock(hashtextextended(p_queue || chr(31) || p_group_id, 70677175));
    LOOP
        PERFORM 1 FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR KEY SHARE;
        IF FOUND THEN
            RETURN false;
        END IF;
        -- Our own uncommitted row is invisible to every other transaction until we commit.
        INSERT INTO pgque_fifo.groups (queue, group_id, priority, fkey)
        VALUES (p_queue, p_group_id, p_priority, p_fkey)
        ON CONFLICT (queue, group_id) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        -- Another publish created the row meanwhile (or a drain deleted it): look again.
    END LOOP;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_lock_join_v2(
    p_queue text, p_group_id text, p_priority integer, p_fkey text, p_now double precision)
RETURNS void LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    v_first smallint;
    v_first_key text;
    v_created boolean;
BEGIN
    SELECT s.priority, s.fkey INTO v_first, v_first_key FROM pgque_fifo.scheduled s
     WHERE s.queue = p_queue AND s.group_id = p_group_id AND s.due_at <= p_now
     ORDER BY s.due_at, s.id LIMIT 1;
    IF NOT FOUND THEN
        PERFORM pgque_fifo.pgque_lock_group_v3(p_queue, p_group_id, p_priority, p_fkey);
        RETURN;
    END IF;
    v_created := pgque_fifo.pgque_lock_group_v3(p_queue, p_group_id, v_first, v_first_key);
    -- The due messages join a group without messages: it takes the first one's key.
    PERFORM pgque_fifo.pgque_key_join_v1(p_queue, p_group_id, v_first_key);
    IF pgque_fifo.pgque_join_due_v1(p_queue, p_group_id, p_now, NULL) = 0 AND v_created THEN
        UPDATE pgque_fifo.groups g SET priority = p_priority
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_v2(
    p_queue text, p_group_id text, p_event text, p_priority integer, p_fkey text,
    p_now double precision)
RETURNS bigint LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_id bigint;
BEGIN
    -- The group's scheduled messages due by now join first: they are ahead of this one.
    PERFORM pgque_fifo.pgque_lock_join_v2(
        p_queue, p_group_id, p_priority, COALESCE(p_fkey, ''), v_now);
    PERFORM pgque_fifo.pgque_key_join_v1(p_queue, p_group_id, COALESCE(p_fkey, ''));
    INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority, fkey)
    VALUES (p_queue, p_group_id, p_event, v_now, p_priority, COALESCE(p_fkey, ''))
    RETURNING id INTO v_id;
    -- Wake the workers LISTENing on the queue; sent at commit, so a rolled-back publish
    -- wakes nobody.
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_many_v2(
    p_queue text, p_group_ids text[], p_events text[], p_priority integer, p_fkey text,
    p_now double precision)
RETURNS bigint[] LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_group text;
    v_ids bigint[];
BEGIN
    IF cardinality(p_group_ids) IS DISTINCT FROM cardinality(p_events) THEN
        RAISE EXCEPTION 'pgque: % group ids but % events',
            cardinality(p_group_ids), cardinality(p_events);
    END IF;
    -- Lock the groups in one global order so two batches never wait on each other in a cycle;
    -- each group's scheduled messages due by now join it first.
    FOR v_group IN
        SELECT DISTINCT u.g COLLATE "C" FROM unnest(p_group_ids) AS u(g) ORDER BY 1
    LOOP
        PERFORM pgque_fifo.pgque_lock_join_v2(
            p_queue, v_group, p_priority, COALESCE(p_fkey, ''), v_now);
        PERFORM pgque_fifo.pgque_key_join_v1(p_queue, v_group, COALESCE(p_fkey, ''));
    END LOOP;
    -- Identity values are drawn as rows are produced, in item order: sorted ids = item order.
    WITH inserted AS (
        INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority, fkey)
        SELECT p_queue, u.g, u.e, v_now, p_priority, COALESCE(p_fkey, '')
          FROM unnest(p_group_ids, p_events) WITH ORDINALITY AS u(g, e, n)
         ORDER BY u.n
        RETURNING id
    )
    SELECT array_agg(i.id ORDER BY i.id) INTO v_ids FROM inserted AS i;
    -- One notification per transaction and channel: Postgres folds repeats.
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN COALESCE(v_ids, '{}');
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
        IF pgque_fifo.pgque_lock_group_v3(
               p_queue, v_row.group_id, COALESCE(v_first, v_row.priority), '') THEN
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
        PERFORM pgque_fifo.pgque_lock_join_v2(
            p_queue, v_row.group_id, v_row.priority, '', v_now);
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

DROP FUNCTION pgque_fifo.pgque_lock_join_v1(text, text, integer, double precision);
DROP FUNCTION pgque_fifo.pgque_lock_group_v2(text, text, integer);

-- Helpers: only the entry points are granted (80_roles.sql).
REVOKE ALL ON FUNCTION pgque_fifo.pgque_lock_group_v3(text, text, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_lock_join_v2(text, text, integer, text, double precision)
    FROM PUBLIC;

-- Roles set up before this migration keep working without a second role setup (as in
-- migrations 0017 and 0018): where roles exist, the new helpers go to the owner of the entry
-- points (the admin role), whose rights the entry points that call them run with. A database
-- without roles is left as it is.
DO $$
DECLARE
    v_admin name;
    v_fn regprocedure;
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
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace AND r.rolname <> v_admin
                 ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn, v_admin);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
END
$$;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (20, 'keyed groups written once');
