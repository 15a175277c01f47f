-- Migration 0016: one version of each entry point.
--
-- No release of pgque has been published, so no worker of a previous release calls a
-- superseded version: each goes now, and every caller uses the one version left (the policy
-- once releases exist keeps the previous version for one release: docs/postgres.md, "Entry
-- points through a rolling upgrade"). Dropped, with the version that stays:
--   pgque_claim_v1 (pgque_claim_v2), pgque_nack_v1 (pgque_nack_v2), pgque_dead_letter_v1
--   (pgque_dead_letter_v2), pgque_dead_letters_v1 (pgque_dead_letters_v2), pgque_redrive_v1
--   and pgque_redrive_v2 (pgque_redrive_v3), pgque_unblock_v1 (pgque_unblock_v2),
--   pgque_resume_v1 (pgque_resume_v2), pgque_stats_v1 and pgque_stats_v2 (pgque_stats_v3), and
--   the helper pgque_lock_group_v1 (pgque_lock_group_v2).
-- The functions that called one of them now do the same work without it, unchanged in what
-- they do:
--   pgque_redrive_v3 calls two helpers named for their halves, pgque_redrive_in_place_v1 (the
--   in-place body of pgque_redrive_v2) and pgque_redrive_at_tail_v1 (the body of
--   pgque_redrive_v1);
--   pgque_stats_v3 counts the groups, messages and dead letters itself (pgque_stats_v2's body);
--   pgque_lock_join_v1 takes the group's lock with pgque_lock_group_v2;
--   pgque_setup_roles_v1 no longer lists the dropped entry points.
-- No table changes.

-- The two halves of a redrive: helpers (SECURITY INVOKER), called by pgque_redrive_v3 only.

CREATE FUNCTION pgque_fifo.pgque_redrive_in_place_v1(
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
        SELECT DISTINCT ON (d.group_id) d.group_id, d.priority FROM pgque_fifo.dead_letters d
         WHERE d.id = ANY (v_ids)
         ORDER BY d.group_id, d.id
    LOOP
        SELECT g.paused, g.drained INTO v_paused, v_drained FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
        IF v_row.group_id = ANY (v_created) THEN
            UPDATE pgque_fifo.groups g SET priority = v_row.priority
             WHERE g.queue = p_queue AND g.group_id = v_row.group_id
               AND g.priority <> v_row.priority;
        ELSIF v_drained THEN
            SELECT m.priority INTO v_head_priority FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND m.group_id = v_row.group_id
             ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
            IF FOUND THEN
                UPDATE pgque_fifo.groups g SET drained = false, priority = v_head_priority
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            ELSIF v_paused THEN
                UPDATE pgque_fifo.groups g SET drained = false
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            ELSE
                UPDATE pgque_fifo.groups g
                   SET drained = false, priority = v_row.priority, until = NULL, token = NULL,
                       leased_id = NULL, holder = NULL, blocked = false
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            END IF;
        END IF;
    END LOOP;
    WITH src AS (
        SELECT DISTINCT ON (d.message_id) d.id, d.message_id, d.group_id, d.event, d.priority,
               d.seq
          FROM pgque_fifo.dead_letters d
         WHERE d.id = ANY (v_ids)
         ORDER BY d.message_id, d.id
    ),
    -- The original id and position; a message that somehow still exists keeps its dead letter.
    inserted AS (
        INSERT INTO pgque_fifo.messages
            (id, queue, group_id, event, attempts, enqueued_at, priority, last_error, seq)
        OVERRIDING SYSTEM VALUE
        SELECT s.message_id, p_queue, s.group_id, s.event, 0, v_now, s.priority, NULL, s.seq
          FROM src s
         ORDER BY s.message_id
        ON CONFLICT (id) DO NOTHING
        RETURNING id
    )
    DELETE FROM pgque_fifo.dead_letters d
     USING src s, inserted i
     WHERE d.id = s.id AND i.id = s.message_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
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


CREATE FUNCTION pgque_fifo.pgque_redrive_at_tail_v1(
    p_queue text, p_ids bigint[], p_now double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_count integer;
    v_groups text[] := '{}';
    v_got text[];
    v_first_ids bigint[];
    v_first_priorities smallint[];
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
        RETURNING d.id, d.group_id, d.event, d.priority
    ),
    -- Identity values are drawn as rows are produced: message ids follow dead-letter ids.
    inserted AS (
        INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority)
        SELECT p_queue, t.group_id, t.event, v_now, t.priority FROM taken t ORDER BY t.id
        RETURNING id, group_id, priority
    ),
    firsts AS (
        SELECT DISTINCT ON (i.group_id) i.group_id, i.id, i.priority FROM inserted i
         ORDER BY i.group_id, i.id
    )
    SELECT (SELECT count(*) FROM inserted), COALESCE(array_agg(f.group_id), '{}'),
           array_agg(f.id), array_agg(f.priority)
      INTO v_count, v_got, v_first_ids, v_first_priorities
      FROM firsts f;
    IF cardinality(v_got) < cardinality(v_groups) THEN
        DELETE FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = ANY (v_groups) AND g.group_id <> ALL (v_got)
           AND NOT g.paused
           AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                            WHERE m.queue = g.queue AND m.group_id = g.group_id);
    END IF;
    UPDATE pgque_fifo.groups g SET priority = f.priority
      FROM unnest(v_got, v_first_ids, v_first_priorities) AS f(group_id, id, priority)
     WHERE g.queue = p_queue AND g.group_id = f.group_id AND g.priority <> f.priority
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


-- New functions are executable by PUBLIC until revoked.
REVOKE ALL ON FUNCTION pgque_fifo.pgque_redrive_in_place_v1(text, bigint[], double precision)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_redrive_at_tail_v1(text, bigint[], double precision)
    FROM PUBLIC;

-- The helpers belong to whoever migrates; pgque_redrive_v3 runs with its owner's rights (the
-- admin role where roles were set up) and must be able to call them: they go to its owner.
DO $$
DECLARE
    v_owner name;
    v_fn regprocedure;
BEGIN
    SELECT r.rolname INTO v_owner
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
     WHERE p.oid = 'pgque_fifo.pgque_redrive_v3(text, bigint[], boolean, boolean,'
                   ' double precision)'::regprocedure;
    FOREACH v_fn IN ARRAY ARRAY[
        'pgque_fifo.pgque_redrive_in_place_v1(text, bigint[], double precision)'::regprocedure,
        'pgque_fifo.pgque_redrive_at_tail_v1(text, bigint[], double precision)'::regprocedure]
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn, v_owner);
    END LOOP;
END
$$;

-- The functions that called a dropped one. CREATE OR REPLACE keeps the owner and the grants,
-- and sets SECURITY DEFINER and the settings to what each definition says.

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_redrive_v3(
    p_queue text, p_ids bigint[], p_in_place boolean, p_retry_now boolean,
    p_now double precision)
RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_messages bigint[];
    v_errors text[];
    v_groups text[];
    v_count integer;
BEGIN
    IF NOT p_in_place THEN
        RETURN pgque_fifo.pgque_redrive_at_tail_v1(p_queue, p_ids, v_now);
    END IF;
    SELECT array_agg(d.message_id ORDER BY d.id), array_agg(d.error ORDER BY d.id),
           array_agg(DISTINCT d.group_id)
      INTO v_messages, v_errors, v_groups
      FROM pgque_fifo.dead_letters d
     WHERE d.queue = p_queue AND (p_ids IS NULL OR d.id = ANY (p_ids));
    v_count := pgque_fifo.pgque_redrive_in_place_v1(p_queue, p_ids, v_now);
    IF v_count = 0 THEN
        RETURN 0;
    END IF;
    UPDATE pgque_fifo.messages m SET last_error = e.error
      FROM unnest(v_messages, v_errors) AS e(message_id, error)
     WHERE m.id = e.message_id AND m.queue = p_queue AND e.error IS NOT NULL
       AND m.last_error IS NULL AND m.attempts = 0
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.dead_letters d
                        WHERE d.queue = p_queue AND d.message_id = e.message_id);
    IF p_retry_now THEN
        UPDATE pgque_fifo.groups g SET until = v_now
         WHERE g.queue = p_queue AND g.group_id = ANY (v_groups) AND NOT g.drained
           AND NOT g.blocked AND g.token IS NULL AND g.until > v_now;
    END IF;
    RETURN v_count;
END
$$;


CREATE OR REPLACE FUNCTION pgque_fifo.pgque_stats_v3(p_queue text, p_now double precision)
RETURNS TABLE (groups bigint, messages bigint, in_flight bigint, parked bigint, blocked bigint,
               dead_letters bigint, oldest_age_s double precision,
               next_resume_at double precision, paused bigint, scheduled bigint,
               next_due_at double precision)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_due bigint;
    v_oldest_due double precision;
BEGIN
    SELECT count(*) FILTER (WHERE NOT g.drained OR g.paused
                               OR EXISTS (SELECT 1 FROM pgque_fifo.messages m
                                           WHERE m.queue = g.queue AND m.group_id = g.group_id)),
           count(*) FILTER (WHERE NOT g.paused AND NOT g.blocked AND g.until > v_now
                              AND g.token IS NOT NULL),
           count(*) FILTER (WHERE NOT g.paused AND NOT g.blocked AND g.until > v_now
                              AND g.token IS NULL),
           count(*) FILTER (WHERE NOT g.paused AND g.blocked),
           min(g.until) FILTER (WHERE NOT g.paused AND NOT g.blocked AND g.until > v_now
                                  AND g.token IS NULL),
           count(*) FILTER (WHERE g.paused)
      INTO groups, in_flight, parked, blocked, next_resume_at, paused
      FROM pgque_fifo.groups g
     WHERE g.queue = p_queue;
    -- greatest() skips NULLs, so an empty queue must be spelt out: its age is NULL, not 0.
    SELECT count(*),
           CASE WHEN count(*) > 0 THEN greatest(0, v_now - min(m.enqueued_at)) END
      INTO messages, oldest_age_s
      FROM pgque_fifo.messages m
     WHERE m.queue = p_queue;
    SELECT count(*) INTO dead_letters FROM pgque_fifo.dead_letters d WHERE d.queue = p_queue;
    -- The scheduled messages due by now, counted as joined.
    SELECT count(*), min(s.due_at) INTO v_due, v_oldest_due FROM pgque_fifo.scheduled s
     WHERE s.queue = p_queue AND s.due_at <= v_now;
    IF v_due > 0 THEN
        messages := messages + v_due;
        oldest_age_s := greatest(COALESCE(oldest_age_s, 0), v_now - v_oldest_due);
        groups := groups + (
            SELECT count(DISTINCT s.group_id) FROM pgque_fifo.scheduled s
             WHERE s.queue = p_queue AND s.due_at <= v_now
               AND NOT EXISTS (
                   SELECT 1 FROM pgque_fifo.groups g
                    WHERE g.queue = s.queue AND g.group_id = s.group_id
                      AND (NOT g.drained OR g.paused
                           OR EXISTS (SELECT 1 FROM pgque_fifo.messages m
                                       WHERE m.queue = g.queue AND m.group_id = g.group_id))));
    END IF;
    SELECT count(*), min(s.due_at) INTO scheduled, next_due_at FROM pgque_fifo.scheduled s
     WHERE s.queue = p_queue AND s.due_at > v_now;
    RETURN NEXT;
END
$$;


CREATE OR REPLACE FUNCTION pgque_fifo.pgque_lock_join_v1(
    p_queue text, p_group_id text, p_priority integer, p_now double precision)
RETURNS void LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    v_first smallint;
    v_created boolean;
BEGIN
    SELECT s.priority INTO v_first FROM pgque_fifo.scheduled s
     WHERE s.queue = p_queue AND s.group_id = p_group_id AND s.due_at <= p_now
     ORDER BY s.due_at, s.id LIMIT 1;
    IF NOT FOUND THEN
        PERFORM pgque_fifo.pgque_lock_group_v2(p_queue, p_group_id, p_priority);
        RETURN;
    END IF;
    v_created := pgque_fifo.pgque_lock_group_v2(p_queue, p_group_id, v_first);
    IF pgque_fifo.pgque_join_due_v1(p_queue, p_group_id, p_now, NULL) = 0 AND v_created THEN
        UPDATE pgque_fifo.groups g SET priority = p_priority
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
    END IF;
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
    v_producer_fns text[] := ARRAY['pgque_publish_v1', 'pgque_publish_many_v1',
                                   'pgque_publish_dedup_v1', 'pgque_partition_slots_v1',
                                   'pgque_schedule_v1', 'pgque_schedule_many_v1',
                                   'pgque_cancel_v1', 'pgque_scheduled_v1',
                                   'pgque_publish_tick_v1', 'pgque_last_tick_v1'];
    v_worker_fns text[] := ARRAY['pgque_claim_v2', 'pgque_ack_v1', 'pgque_ack_many_v1',
                                 'pgque_nack_v2', 'pgque_release_lease_v1', 'pgque_extend_v1',
                                 'pgque_dead_letter_v2', 'pgque_settle_claim_v1',
                                 'pgque_stats_v3', 'pgque_next_due_v1',
                                 'pgque_channel_v1', 'pgque_partition_slots_v1'];
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
                  WHERE c.relnamespace = 'pgque_fifo'::regnamespace AND c.relkind IN ('r', 'v')
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


-- The superseded versions. Whatever roles were granted on them goes with them.
DROP FUNCTION pgque_fifo.pgque_claim_v1(
    text, integer, double precision, integer, integer, text, double precision);
DROP FUNCTION pgque_fifo.pgque_nack_v1(
    text, text, bigint, text, double precision, double precision);
DROP FUNCTION pgque_fifo.pgque_dead_letter_v1(text, text, bigint, text, text, double precision);
DROP FUNCTION pgque_fifo.pgque_dead_letters_v1(text, integer);
DROP FUNCTION pgque_fifo.pgque_redrive_v2(text, bigint[], boolean, double precision);
DROP FUNCTION pgque_fifo.pgque_redrive_v1(text, bigint[], double precision);
DROP FUNCTION pgque_fifo.pgque_unblock_v1(text, text, boolean, double precision);
DROP FUNCTION pgque_fifo.pgque_resume_v1(text, text);
DROP FUNCTION pgque_fifo.pgque_stats_v1(text, double precision);
DROP FUNCTION pgque_fifo.pgque_stats_v2(text, double precision);
DROP FUNCTION pgque_fifo.pgque_lock_group_v1(text, text, integer);

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (16, 'one version of each entry point');
