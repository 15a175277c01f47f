-- Scheduling: messages published with a delay wait in the scheduled table and join their
-- group's tail when due; periodic schedules publish each tick once.
-- The functions that probe the scheduled table on every claim and publish run with
-- enable_seqscan = off (so does pgque_lock_join_v2): a table that autovacuum analyzed while
-- empty (the scheduled table of every fresh database) made the planner pick a sequential scan,
-- and a worker's session kept that plan while the table filled. They only ever want their
-- index ranges.

-- Schedule one message: it joins p_group_id's tail at now + p_delay (p_delay > 0) with the id
-- returned now, drawn from the messages' id sequence. Holds the queue's lock (shared) like a
-- publish, so a purge runs wholly before or after it; no group lock: nothing is appended yet.
-- Notifies the queue's channel so a waiting worker re-caps its wait at the new due time.
-- p_fkey: the fairness key a group it makes takes (NULL: the default key '').
CREATE FUNCTION pgque_fifo.pgque_schedule_v2(
    p_queue text, p_group_id text, p_event text, p_priority integer, p_delay double precision,
    p_fkey text, p_now double precision)
RETURNS bigint LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_id bigint;
BEGIN
    IF p_delay IS NULL OR NOT (p_delay > 0 AND p_delay <= 31622400) THEN
        RAISE EXCEPTION 'pgque: a schedule delay must be > 0 and at most 366 days, not %',
            p_delay USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (v_now + p_delay > '-Infinity' AND v_now + p_delay < 'Infinity') THEN
        RAISE EXCEPTION 'pgque: a schedule due time must be finite, not % + %', v_now, p_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    INSERT INTO pgque_fifo.scheduled
        (id, queue, group_id, event, priority, due_at, enqueued_at, fkey)
    VALUES (nextval('pgque_fifo.messages_id_seq'::regclass), p_queue, p_group_id,
            p_event, p_priority, v_now + p_delay, v_now, COALESCE(p_fkey, ''))
    RETURNING id INTO v_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_id;
END
$$;

-- Schedule many messages with one due time, atomically; ids in item order (drawn, then sorted
-- and given out by item number).
CREATE FUNCTION pgque_fifo.pgque_schedule_many_v2(
    p_queue text, p_group_ids text[], p_events text[], p_priority integer,
    p_delay double precision, p_fkey text, p_now double precision)
RETURNS bigint[] LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_count integer := COALESCE(cardinality(p_group_ids), 0);
    v_ids bigint[];
BEGIN
    IF v_count IS DISTINCT FROM COALESCE(cardinality(p_events), 0) THEN
        RAISE EXCEPTION 'pgque: % group ids but % events', v_count, cardinality(p_events);
    END IF;
    IF p_delay IS NULL OR NOT (p_delay > 0 AND p_delay <= 31622400) THEN
        RAISE EXCEPTION 'pgque: a schedule delay must be > 0 and at most 366 days, not %',
            p_delay USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (v_now + p_delay > '-Infinity' AND v_now + p_delay < 'Infinity') THEN
        RAISE EXCEPTION 'pgque: a schedule due time must be finite, not % + %', v_now, p_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_count = 0 THEN
        RETURN '{}';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    v_ids := ARRAY(SELECT n.id FROM (
                       SELECT nextval('pgque_fifo.messages_id_seq'::regclass) AS id
                         FROM generate_series(1, v_count)) AS n
                    ORDER BY n.id);
    INSERT INTO pgque_fifo.scheduled
        (id, queue, group_id, event, priority, due_at, enqueued_at, fkey)
    SELECT v_ids[u.n], p_queue, u.g, u.e, p_priority, v_now + p_delay, v_now,
           COALESCE(p_fkey, '')
      FROM unnest(p_group_ids, p_events) WITH ORDINALITY AS u(g, e, n);
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_ids;
END
$$;

-- Drop a scheduled message that is not due yet; false if it is due (joined or not), unknown
-- or not of this queue. Locks that one row (waiting for a claim that is moving it in, which
-- then finds it gone or, once the claim commits, the cancel finds nothing).
CREATE FUNCTION pgque_fifo.pgque_cancel_v1(p_queue text, p_id bigint, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp SET enable_seqscan = off AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    DELETE FROM pgque_fifo.scheduled s
     WHERE s.id = p_id AND s.queue = p_queue AND s.due_at > v_now;
    RETURN FOUND;
END
$$;

-- Up to p_limit (1 to 1,000) scheduled messages not due by p_now with id > p_after, in id
-- order.
CREATE FUNCTION pgque_fifo.pgque_scheduled_v1(
    p_queue text, p_limit integer, p_after bigint, p_now double precision)
RETURNS TABLE (id bigint, group_id text, due_at double precision, event text, priority integer,
               enqueued_at double precision)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp SET enable_seqscan = off AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'pgque: a scheduled page limit must be 1 to 1000, not %', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT s.id, s.group_id, s.due_at, s.event, s.priority::integer, s.enqueued_at
          FROM pgque_fifo.scheduled s
         WHERE s.queue = p_queue AND s.id > COALESCE(p_after, 0)
           AND s.due_at > COALESCE(p_now,
                                   extract(epoch FROM clock_timestamp())::double precision)
         ORDER BY s.id
         LIMIT p_limit;
END
$$;

-- When an idle worker's wait must end: due_now (a scheduled message is due by p_now but has not
-- joined its group yet: a claim lets it in, unless its group's lock is held, see
-- pgque_promote_v1) and due_in, the seconds from p_now until the next scheduled message that
-- is not due yet falls due (NULL if none). Two descents of scheduled_due.
CREATE FUNCTION pgque_fifo.pgque_next_due_v1(p_queue text, p_now double precision)
RETURNS TABLE (due_now boolean, due_in double precision)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    due_now := COALESCE((SELECT s.due_at FROM pgque_fifo.scheduled s
                          WHERE s.queue = p_queue ORDER BY s.due_at LIMIT 1) <= v_now, false);
    due_in := (SELECT s.due_at - v_now FROM pgque_fifo.scheduled s
                WHERE s.queue = p_queue AND s.due_at > v_now
                ORDER BY s.due_at LIMIT 1);
    RETURN NEXT;
END
$$;

-- Move the scheduled messages of one group that are due by p_now to its tail, in (due_at, id)
-- order, the first p_limit of them (all when NULL: an append lets in every one, a claim's
-- promotion a bounded batch); returns how many. The caller holds the group's advisory lock and its row (as
-- pgque_lock_group_v3 takes them), so nothing else appends to the group meanwhile. Each keeps
-- its id and gets a position (messages.seq) drawn from the id sequence now: after every message
-- the group has, before every later publish. The rows are locked FOR UPDATE in (due_at, id)
-- order: under the group's lock the only other holder can be a cancel, which waits for
-- nothing, so waiting for it is safe (and keeps the join order exact).
CREATE FUNCTION pgque_fifo.pgque_join_due_v1(
    p_queue text, p_group_id text, p_now double precision, p_limit integer)
RETURNS integer LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    v_count integer;
BEGIN
    -- "Anything due?" as the earliest due time (ORDER BY ... LIMIT 1): a generic plan of this
    -- function (PL/pgSQL's after a few calls) still descends the index for it, while one of
    -- "EXISTS ... due_at <= $now" may read the whole table.
    IF COALESCE((SELECT s.due_at FROM pgque_fifo.scheduled s
                  WHERE s.queue = p_queue AND s.group_id = p_group_id
                  ORDER BY s.due_at LIMIT 1) > p_now, true) THEN
        RETURN 0;
    END IF;
    WITH due AS (
        DELETE FROM pgque_fifo.scheduled s
         WHERE s.id IN (SELECT k.id FROM pgque_fifo.scheduled k
                         WHERE k.queue = p_queue AND k.group_id = p_group_id
                           AND k.due_at <= p_now
                         ORDER BY k.due_at, k.id
                         LIMIT p_limit
                           FOR UPDATE)
        RETURNING s.id, s.event, s.priority, s.due_at, s.fkey
    ),
    -- Output expressions are evaluated after the sort: positions follow (due_at, id).
    joined AS (
        INSERT INTO pgque_fifo.messages
            (id, queue, group_id, event, enqueued_at, priority, seq, fkey)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, p_queue, p_group_id, d.event, d.due_at, d.priority,
               nextval('pgque_fifo.messages_id_seq'::regclass), d.fkey
          FROM due d
         ORDER BY d.due_at, d.id
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM joined;
    RETURN v_count;
END
$$;

-- Take the row of (p_queue, p_group_id) FOR KEY SHARE without waiting (pgque_promote_v1):
-- true if taken; false if there is none or it is locked FOR UPDATE (a drain deleting it). SKIP
-- LOCKED can still wait while PostgreSQL follows the row's update chain (a newer version locked
-- by an open transaction): the function's lock_timeout (20 ms) ends such a wait, and the block
-- gives the row up (false), as pgque_candidates_v2 does.
CREATE FUNCTION pgque_fifo.pgque_share_group_v1(p_queue text, p_group_id text)
RETURNS boolean LANGUAGE plpgsql
SET lock_timeout = '20ms' AS $$
BEGIN
    PERFORM 1 FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       FOR KEY SHARE SKIP LOCKED;
    RETURN FOUND;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;
END
$$;

-- Let the due messages of one group join it (up to p_limit, all when NULL) unless that would
-- wait: the caller holds the queue's lock (shared); the group's advisory lock is only tried and
-- its row taken without waiting (pgque_share_group_v1) or created, with the priority of its
-- first due message; a row locked FOR UPDATE (a drain deleting it) is left for later. Returns
-- how many joined (0 when skipped). Locks in this order: the advisory lock, the row, then the
-- scheduled rows in (due_at, id) order (pgque_join_due_v1).
CREATE FUNCTION pgque_fifo.pgque_promote_one_v1(
    p_queue text, p_group_id text, p_now double precision, p_limit integer)
RETURNS integer LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    v_priority smallint;
    v_fkey text;
BEGIN
    IF NOT pg_try_advisory_xact_lock(
            hashtextextended(p_queue || chr(31) || p_group_id, 70677175)) THEN
        RETURN 0;
    END IF;
    IF NOT pgque_fifo.pgque_share_group_v1(p_queue, p_group_id) THEN
        IF EXISTS (SELECT 1 FROM pgque_fifo.groups g
                    WHERE g.queue = p_queue AND g.group_id = p_group_id) THEN
            RETURN 0;
        END IF;
        SELECT s.priority, s.fkey INTO v_priority, v_fkey FROM pgque_fifo.scheduled s
         WHERE s.queue = p_queue AND s.group_id = p_group_id AND s.due_at <= p_now
         ORDER BY s.due_at, s.id LIMIT 1;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
        INSERT INTO pgque_fifo.groups (queue, group_id, priority, fkey)
        VALUES (p_queue, p_group_id, v_priority, v_fkey)
        ON CONFLICT (queue, group_id) DO NOTHING;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
    END IF;
    RETURN pgque_fifo.pgque_join_due_v1(p_queue, p_group_id, p_now, p_limit);
END
$$;

-- Let the scheduled messages of p_queue that are due by p_now join their groups, oldest first: the
-- groups are visited in the (due_at, id) order of their first due message, at most p_limit of them,
-- and each visited group's due messages join, up to p_limit messages in all (a group cut short
-- keeps the rest in (due_at, id) order for the next call or its next append); returns how many
-- joined. Claims call it first (pgque_claim_v2, pgque_settle_claim_v1). When nothing is due it
-- costs one descent of scheduled_due. It never waits for a lock: the queue's lock (shared) and each
-- group's advisory lock are only tried, and a group whose lock a publish holds is skipped, left for
-- a later call (that publish lets the group's due messages in itself), while the next group is
-- visited: a group held for long hides none of the others. The scan goes on past the skipped
-- group's rows (a cursor on (due_at, id)), so each due row is read at most once per call. The group
-- row is taken FOR KEY SHARE, never waiting (pgque_share_group_v1), or created, with the priority
-- of its first due message; a row locked FOR UPDATE (a drain deleting it) is also left for later.
-- Two claimers therefore never move one message twice: the second fails to take the group's
-- advisory lock while the first holds it, and once the first commits the rows it moved are gone.
-- Locks taken: the queue's lock, then per group (in the order visited, each only tried, so no order
-- can close a cycle) its advisory lock, its row, then its scheduled rows in (due_at, id) order
-- (pgque_join_due_v1).
CREATE FUNCTION pgque_fifo.pgque_promote_v1(p_queue text, p_limit integer, p_now double precision)
RETURNS integer LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    v_group text;
    v_due double precision := '-Infinity';
    v_id bigint := 0;
    v_visited text[] := '{}';
    v_count integer := 0;
BEGIN
    -- The earliest due time, not "EXISTS ... due_at <= $now": see pgque_join_due_v1.
    IF COALESCE((SELECT s.due_at FROM pgque_fifo.scheduled s
                  WHERE s.queue = p_queue ORDER BY s.due_at LIMIT 1) > p_now, true) THEN
        RETURN 0;
    END IF;
    IF NOT pg_try_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176)) THEN
        RETURN 0;
    END IF;
    WHILE cardinality(v_visited) < p_limit AND v_count < p_limit LOOP
        -- The first due message after the cursor of a group not visited yet.
        SELECT s.group_id, s.due_at, s.id INTO v_group, v_due, v_id
          FROM pgque_fifo.scheduled s
         WHERE s.queue = p_queue AND s.due_at <= p_now
           AND (s.due_at, s.id) > (v_due, v_id)
           AND s.group_id <> ALL (v_visited)
         ORDER BY s.due_at, s.id
         LIMIT 1;
        EXIT WHEN NOT FOUND;
        v_visited := v_visited || v_group;
        v_count := v_count + pgque_fifo.pgque_promote_one_v1(
            p_queue, v_group, p_now, p_limit - v_count);
    END LOOP;
    RETURN v_count;
END
$$;

-- Let one group's scheduled messages due by p_now join it (group(): as if they had joined),
-- never waiting: the queue's lock and the group's are only tried (pgque_promote_one_v1), and a
-- group a publish holds is left to that publish, which lets them in itself. Nothing is written
-- in a read-only transaction (a hot standby): there a due message shows once a writer (a claim,
-- a publish into its group) moved it in.
CREATE FUNCTION pgque_fifo.pgque_promote_group_v1(
    p_queue text, p_group_id text, p_now double precision)
RETURNS integer LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
    IF current_setting('transaction_read_only') = 'on'
       OR COALESCE((SELECT s.due_at FROM pgque_fifo.scheduled s
                     WHERE s.queue = p_queue AND s.group_id = p_group_id
                     ORDER BY s.due_at LIMIT 1) > p_now, true)
       OR NOT pg_try_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176)) THEN
        RETURN 0;
    END IF;
    RETURN pgque_fifo.pgque_promote_one_v1(p_queue, p_group_id, p_now, NULL);
END
$$;

-- Publish tick p_tick of schedule entry p_entry once: if the queue has no tick of the entry at
-- or after p_tick, record p_tick and publish the event (pgque_publish_v2) in this one
-- transaction; returns its id, or NULL (nothing changed). Of concurrent callers with one tick
-- the first to write the tick row publishes; the others wait for its commit and find the tick
-- taken (or, if it rolled back, take it themselves). Lock order: the queue's lock (shared,
-- first, as a purge takes it exclusively before the tick rows), the tick row, then the
-- group's locks (pgque_lock_group_v3).
CREATE FUNCTION pgque_fifo.pgque_publish_tick_v2(
    p_queue text, p_entry text, p_tick double precision, p_group_id text, p_event text,
    p_priority integer, p_fkey text, p_now double precision)
RETURNS bigint LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    IF p_tick IS NULL OR NOT (p_tick >= 0 AND p_tick < 'Infinity') THEN
        RAISE EXCEPTION 'pgque: a tick must be finite epoch seconds >= 0, not %', p_tick
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    INSERT INTO pgque_fifo.ticks AS t (queue, entry, tick)
    VALUES (p_queue, p_entry, p_tick)
    ON CONFLICT (queue, entry) DO UPDATE SET tick = EXCLUDED.tick
     WHERE t.tick < EXCLUDED.tick;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN pgque_fifo.pgque_publish_v2(p_queue, p_group_id, p_event, p_priority, p_fkey, p_now);
END
$$;

-- The last tick of p_entry published into p_queue, or NULL.
CREATE FUNCTION pgque_fifo.pgque_last_tick_v1(p_queue text, p_entry text)
RETURNS double precision LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
    SELECT t.tick FROM pgque_fifo.ticks t WHERE t.queue = p_queue AND t.entry = p_entry
$$;
