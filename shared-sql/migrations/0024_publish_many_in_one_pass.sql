-- Migration 0024: publish_many locks and creates its groups' rows in one pass.
--
-- pgque_publish_many_v2 called pgque_lock_join_v2 and pgque_key_join_v1 for each distinct
-- group of a batch: three PL/pgSQL calls, a probe of the scheduled messages, the queue's
-- shared lock again and two or three index descents per group. A batch whose groups have no
-- scheduled message due now takes the groups' advisory locks, their rows (FOR KEY SHARE,
-- creating the missing ones) and the key join in a few statements over all of them: 1,000
-- items into 500 groups read about a fifth fewer buffers (each row is looked up by its
-- primary key, whatever the statistics say, so a queue of many groups is never scanned). A
-- batch with a due message for one of its groups takes the call per group as before. The
-- advisory locks are all taken (in group-id byte order) before the first row; only publishes
-- take them, and what a row lock of a publish waits for waits for no advisory lock
-- (docs/postgres.md, lock order).
--   Changed body: pgque_publish_many_v2 (same arguments, same result).
-- No table changes.

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_many_v2(
    p_queue text, p_group_ids text[], p_events text[], p_priority integer, p_fkey text,
    p_now double precision)
RETURNS bigint[] LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_fkey text := COALESCE(p_fkey, '');
    v_groups text[];
    v_todo text[];
    v_keyed text[] := '{}';
    v_more text[];
    v_group text;
    v_ids bigint[];
BEGIN
    IF cardinality(p_group_ids) IS DISTINCT FROM cardinality(p_events) THEN
        RAISE EXCEPTION 'pgque: % group ids but % events',
            cardinality(p_group_ids), cardinality(p_events);
    END IF;
    -- The distinct groups in one global order, so two batches never wait on each other in a
    -- cycle.
    v_groups := ARRAY(SELECT DISTINCT u.g COLLATE "C" FROM unnest(p_group_ids) AS u(g) ORDER BY 1);
    IF EXISTS (SELECT 1 FROM pgque_fifo.scheduled s
                WHERE s.queue = p_queue AND s.group_id = ANY (v_groups) AND s.due_at <= v_now) THEN
        -- Each group's scheduled messages due by now join it first.
        FOREACH v_group IN ARRAY v_groups LOOP
            PERFORM pgque_fifo.pgque_lock_join_v2(p_queue, v_group, p_priority, v_fkey, v_now);
            PERFORM pgque_fifo.pgque_key_join_v1(p_queue, v_group, v_fkey);
        END LOOP;
    ELSE
        -- What pgque_lock_group_v3 does for one group, for all of them.
        PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
        PERFORM pg_advisory_xact_lock(hashtextextended(p_queue || chr(31) || u.g, 70677175))
           FROM unnest(v_groups) WITH ORDINALITY AS u(g, n)
          ORDER BY u.n;
        v_todo := v_groups;
        LOOP
            -- Each row by its primary key, in v_todo's (byte) order: a subquery that locks rows
            -- is never flattened, so no plan can scan the queue's other groups instead.
            WITH held AS (
                SELECT l.group_id, l.fkey FROM unnest(v_todo) AS u(g)
                 CROSS JOIN LATERAL (
                    SELECT g.group_id, g.fkey FROM pgque_fifo.groups g
                     WHERE g.queue = p_queue AND g.group_id = u.g
                       FOR KEY SHARE) AS l
            ), made AS (
                -- Our own uncommitted rows are invisible to every other transaction until we
                -- commit.
                INSERT INTO pgque_fifo.groups (queue, group_id, priority, fkey)
                SELECT p_queue, u.g, p_priority, v_fkey FROM unnest(v_todo) AS u(g)
                 WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.group_id = u.g)
                 ORDER BY u.g
                ON CONFLICT (queue, group_id) DO NOTHING
                RETURNING group_id
            )
            -- Left: rows another transaction created meanwhile (or a drain deleted): look
            -- again. Rows of another key: the key join below.
            SELECT ARRAY(SELECT u.g FROM unnest(v_todo) AS u(g)
                          WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.group_id = u.g)
                            AND NOT EXISTS (SELECT 1 FROM made m WHERE m.group_id = u.g)),
                   ARRAY(SELECT h.group_id FROM held h WHERE h.fkey <> v_fkey)
              INTO v_todo, v_more;
            v_keyed := v_keyed || v_more;
            EXIT WHEN cardinality(v_todo) = 0;
        END LOOP;
        -- A group of another key takes this one if it has no messages (pgque_key_join_v1);
        -- a row made here has it already.
        FOREACH v_group IN ARRAY v_keyed LOOP
            PERFORM pgque_fifo.pgque_key_join_v1(p_queue, v_group, v_fkey);
        END LOOP;
    END IF;
    -- Identity values are drawn as rows are produced, in item order: sorted ids = item order.
    WITH inserted AS (
        INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority, fkey)
        SELECT p_queue, u.g, u.e, v_now, p_priority, v_fkey
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

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (24, 'publish many in one pass');
