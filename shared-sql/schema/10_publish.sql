-- Publish: append messages at their groups' tails, and the per-group lock every append takes
-- (the group row FOR KEY SHARE, behind the group's advisory lock and the queue's shared lock).
-- A delayed publish is in 50_scheduling.sql, the deduplicated one in 70_partition_keys.sql.

-- Make sure the group row exists and hold it FOR KEY SHARE until the caller's transaction ends.
-- That lock does not conflict with claims and acks (they take FOR NO KEY UPDATE), only with
-- deleting the row: a draining ack cannot drop a group while a publish into it is in flight,
-- which is how the seed's design orphaned messages (the drain marks the row drained instead;
-- see pgque_release_v1).
-- Publishes into one group also queue behind each other (a transaction-scoped advisory lock on
-- a 64-bit hash of queue and group). Without it two concurrent publishes could commit out of id
-- order, and a claim could lease message 101 while message 100 was still invisible: the group
-- would no longer be FIFO by id. The lock order (docs/postgres.md): per group, in group-id byte
-- order, its advisory lock and then its row; 64 bits make a collision, which could take two
-- groups' locks out of that order, practically impossible.
-- Before both, the queue's lock in shared mode: pgque_purge_v1 takes it exclusively, so a purge
-- runs between publishes, never through the middle of one (half a publish_many purged).
-- Returns whether it created the row (an in-place redrive then knows the group did not exist).
-- A row it creates has the fairness key p_fkey ('' the default key): a keyed publish writes its
-- group's row once. (Inserted under '' and then given its key, each new keyed group left a dead
-- row version in groups_key's range of the key '', which every keyed claim of the queue walks
-- first, until a vacuum: read at 1,000,000 groups, that halved the keyed claims' rate.)
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

-- pgque_lock_group_v3 for an append of a message of fairness key p_fkey into the group, after
-- which the group's scheduled messages due by p_now join it (pgque_join_due_v1): they joined at
-- their due times, before this append, so a group without a row is created with the priority
-- and key of its first due message (the one that made it), and with p_priority only when they
-- turn out to be gone (a claim let them in meanwhile, see pgque_promote_v1). A row created
-- for the append alone has the key p_fkey (a publish's pgque_key_join_v1 then finds it has it
-- already). Costs one probe of scheduled_group when nothing is due.
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

-- The LISTEN/NOTIFY channel of a queue: a fixed prefix and a hash, so every queue name gives a
-- valid channel name (38 characters; channel names are identifiers of at most 63 bytes).
CREATE FUNCTION pgque_fifo.pgque_channel_v1(p_queue text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'pgque_' || md5(p_queue)
$$;

-- p_fkey: the fairness key the group takes if this message is its first (NULL: the default
-- key ''; pgque_key_join_v1).
CREATE FUNCTION pgque_fifo.pgque_publish_v2(
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

-- A batch whose groups have no scheduled message due (the usual case) locks and creates its
-- group rows a statement at a time, not a function call per group: the groups' advisory locks
-- in group-id byte order, then their rows FOR KEY SHARE in the same order, creating those that
-- are missing (taking every advisory lock before the first row changes nothing a cycle could
-- form on: only publishes take these advisory locks, always in this order, and the holders of
-- a row lock a publish waits for, a drain's delete or a pause's insert, wait for no advisory
-- lock). The rows are looked up one by one by primary key, whatever the statistics say, so a
-- queue of many groups is never scanned. 1,000 items into 500 groups: about a fifth fewer
-- buffer reads than the call per group. A batch with due messages for one of its groups takes
-- the call per group (pgque_lock_join_v2), which lets them in first.
CREATE FUNCTION pgque_fifo.pgque_publish_many_v2(
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
