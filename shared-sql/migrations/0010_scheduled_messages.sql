-- Migration 0010: scheduled messages and periodic ticks (issue 17).
--
-- * Table scheduled: messages published with a delay, until due (ids from the messages' id
--   sequence). A due message joins its group's tail keeping its id: messages.seq (NULL = id)
--   is its position, and a group's FIFO order is COALESCE(seq, id) (messages_head is rebuilt on
--   that key); every function that orders a group's messages uses it. dead_letters.seq keeps a
--   dead message's position for an in-place redrive (pgque_bury_v2, pgque_redrive_v2).
-- * Joining: pgque_join_due_v1 (one group, under its locks) from every append (publish,
--   publish_many, publish_tick, redrive not in place); pgque_promote_v1 (the queue's due ones,
--   bounded, never waiting) from claim_v2 and settle_claim_v1; group_v1 / groups_v1 let due
--   ones join first; stats_v3 counts them as joined.
-- * Entry points: schedule_v1, schedule_many_v1, cancel_v1, scheduled_v1, publish_tick_v1,
--   last_tick_v1 (producer), next_due_v1 and stats_v3 (worker); table ticks; purge clears both.
-- * The operator view queue_stats gains scheduled and next_due_at.
-- * pgque_partition_reset_slots_v1 refuses a queue with scheduled messages too.
-- * pgque_setup_roles_v1 grants them; roles set up before this migration get them here.

ALTER TABLE pgque_fifo.messages ADD COLUMN seq bigint;

-- A group's FIFO order is COALESCE(seq, id): a scheduled message that joined keeps its (older)
-- id and takes a position from the id sequence when it joins.
DROP INDEX pgque_fifo.messages_head;
CREATE INDEX messages_head ON pgque_fifo.messages (queue, group_id, (COALESCE(seq, id)));

-- A dead letter remembers its message's position, which an in-place redrive restores.
ALTER TABLE pgque_fifo.dead_letters ADD COLUMN seq bigint;

-- Messages published with a delay (issue 17), until they are due. id is drawn from the
-- messages' id sequence when the message is scheduled, so ids stay one monotonic sequence and
-- the message keeps its id when it joins its group. enqueued_at is the publish time; at due_at
-- the message joins its group's tail (pgque_join_due_v1) with enqueued_at = due_at. Rows are
-- only inserted and deleted. scheduled_due serves "what is due" (a claim's probe: one index
-- descent when nothing is due, however many wait) and next_due_at; scheduled_group serves the
-- due messages of one group (the publish path's probe).
CREATE TABLE pgque_fifo.scheduled (
    id          bigint PRIMARY KEY,
    queue       text COLLATE "C" NOT NULL,
    group_id    text COLLATE "C" NOT NULL,
    event       text NOT NULL,
    priority    smallint NOT NULL CHECK (priority BETWEEN 0 AND 4),
    due_at      double precision NOT NULL,
    enqueued_at double precision NOT NULL
);

CREATE INDEX scheduled_due ON pgque_fifo.scheduled (queue, due_at, id);
CREATE INDEX scheduled_group ON pgque_fifo.scheduled (queue, group_id, due_at, id);

-- The last tick of each periodic schedule entry published into a queue (pgque_publish_tick_v1).
CREATE TABLE pgque_fifo.ticks (
    queue text COLLATE "C" NOT NULL,
    entry text COLLATE "C" NOT NULL,
    tick  double precision NOT NULL,
    PRIMARY KEY (queue, entry)
);

-- Move the scheduled messages of one group that are due by p_now to its tail, in (due_at, id)
-- order, the first p_limit of them (all when NULL: an append lets in every one, a claim's
-- promotion a bounded batch); returns how many. The caller holds the group's advisory lock and its row (as
-- pgque_lock_group_v1 takes them), so nothing else appends to the group meanwhile. Each keeps
-- its id and gets a position (messages.seq) drawn from the id sequence now: after every message
-- the group has, before every later publish. The rows are locked FOR UPDATE in (due_at, id)
-- order: under the group's lock the only other holder can be a cancel, which waits for
-- nothing, so waiting for it is safe (and keeps the join order exact).
CREATE FUNCTION pgque_fifo.pgque_join_due_v1(
    p_queue text, p_group_id text, p_now double precision, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
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
        RETURNING s.id, s.event, s.priority, s.due_at
    ),
    -- Output expressions are evaluated after the sort: positions follow (due_at, id).
    joined AS (
        INSERT INTO pgque_fifo.messages
            (id, queue, group_id, event, enqueued_at, priority, seq)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, p_queue, p_group_id, d.event, d.due_at, d.priority,
               nextval('pgque_fifo.messages_id_seq'::regclass)
          FROM due d
         ORDER BY d.due_at, d.id
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM joined;
    RETURN v_count;
END
$$;

-- pgque_lock_group_v1 for an append into the group, after which the group's scheduled
-- messages due by p_now join it (pgque_join_due_v1): they joined at their due times, before
-- this append, so a group without a row is created with the priority of its first due message
-- (the one that made it), and with p_priority only when they turn out to be gone (a claim let
-- them in meanwhile, see pgque_promote_v1). Costs one probe of scheduled_group when nothing is
-- due.
CREATE FUNCTION pgque_fifo.pgque_lock_join_v1(
    p_queue text, p_group_id text, p_priority integer, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_first smallint;
    v_created boolean;
BEGIN
    SELECT s.priority INTO v_first FROM pgque_fifo.scheduled s
     WHERE s.queue = p_queue AND s.group_id = p_group_id AND s.due_at <= p_now
     ORDER BY s.due_at, s.id LIMIT 1;
    IF NOT FOUND THEN
        PERFORM pgque_fifo.pgque_lock_group_v1(p_queue, p_group_id, p_priority);
        RETURN;
    END IF;
    v_created := pgque_fifo.pgque_lock_group_v2(p_queue, p_group_id, v_first);
    IF pgque_fifo.pgque_join_due_v1(p_queue, p_group_id, p_now, NULL) = 0 AND v_created THEN
        UPDATE pgque_fifo.groups g SET priority = p_priority
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
    END IF;
END
$$;

-- Take the row of (p_queue, p_group_id) FOR KEY SHARE without waiting (pgque_promote_v1):
-- true if taken; false if there is none or it is locked FOR UPDATE (a drain deleting it). SKIP
-- LOCKED can still wait while PostgreSQL follows the row's update chain (a newer version locked
-- by an open transaction): the function's lock_timeout (20 ms) ends such a wait, and the block
-- gives the row up (false), as pgque_candidates_v2 does.
CREATE FUNCTION pgque_fifo.pgque_share_group_v1(p_queue text, p_group_id text)
RETURNS boolean LANGUAGE plpgsql AS $$
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
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_priority smallint;
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
        SELECT s.priority INTO v_priority FROM pgque_fifo.scheduled s
         WHERE s.queue = p_queue AND s.group_id = p_group_id AND s.due_at <= p_now
         ORDER BY s.due_at, s.id LIMIT 1;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
        INSERT INTO pgque_fifo.groups (queue, group_id, priority)
        VALUES (p_queue, p_group_id, v_priority)
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
RETURNS integer LANGUAGE plpgsql AS $$
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
RETURNS integer LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_bury_v2(
    p_queue text, p_group_id text, p_message_id bigint, p_reason text, p_error text,
    p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        DELETE FROM pgque_fifo.messages m WHERE m.id = p_message_id
        RETURNING m.queue, m.group_id, m.id, m.event, m.attempts, m.enqueued_at, m.last_error,
                  m.seq
    )
    INSERT INTO pgque_fifo.dead_letters
        (queue, group_id, message_id, event, priority, attempts, reason, enqueued_at, failed_at,
         error, seq)
    SELECT gone.queue, gone.group_id, gone.id, gone.event, g.priority, gone.attempts, p_reason,
           gone.enqueued_at, p_now, COALESCE(p_error, gone.last_error), gone.seq
      FROM gone
      JOIN pgque_fifo.groups g ON g.queue = gone.queue AND g.group_id = gone.group_id;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_v1(
    p_queue text, p_group_id text, p_event text, p_priority integer, p_now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_id bigint;
BEGIN
    -- The group's scheduled messages due by now join first: they are ahead of this one.
    PERFORM pgque_fifo.pgque_lock_join_v1(p_queue, p_group_id, p_priority, v_now);
    INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority)
    VALUES (p_queue, p_group_id, p_event, v_now, p_priority)
    RETURNING id INTO v_id;
    -- Wake the workers LISTENing on the queue; sent at commit, so a rolled-back publish
    -- wakes nobody.
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_many_v1(
    p_queue text, p_group_ids text[], p_events text[], p_priority integer,
    p_now double precision)
RETURNS bigint[] LANGUAGE plpgsql AS $$
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
        PERFORM pgque_fifo.pgque_lock_join_v1(p_queue, v_group, p_priority, v_now);
    END LOOP;
    -- Identity values are drawn as rows are produced, in item order: sorted ids = item order.
    WITH inserted AS (
        INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority)
        SELECT p_queue, u.g, u.e, v_now, p_priority
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
    v_token text;
    v_priority smallint;
BEGIN
    LOOP
        SELECT g.paused, g.drained, h.id, h.event, h.attempts, h.priority
          INTO v_paused, v_drained, v_id, v_event, v_attempts, v_head_priority
          FROM pgque_fifo.groups g
          LEFT JOIN LATERAL (
              SELECT m.id, m.event, m.attempts, m.priority FROM pgque_fifo.messages m
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
            UPDATE pgque_fifo.groups g SET drained = false, priority = v_head_priority
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
            PERFORM pgque_fifo.pgque_bury_v2(
                p_queue, p_group_id, v_id, format('max_attempts (%s) exhausted', p_max_attempts),
                NULL, p_now);
            CONTINUE;
        END IF;
        UPDATE pgque_fifo.messages m SET attempts = m.attempts + 1 WHERE m.id = v_id;
        v_token := replace(gen_random_uuid()::text, '-', '');
        UPDATE pgque_fifo.groups g
           SET token = v_token, leased_id = v_id, holder = p_holder,
               until = p_now + p_visibility
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_redrive_v1(p_queue text, p_ids bigint[], p_now double precision)
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_unblock_v1(
    p_queue text, p_group_id text, p_drop_head boolean, p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
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
    UPDATE pgque_fifo.groups g SET blocked = false
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    SELECT m.id INTO v_head FROM pgque_fifo.messages m
     WHERE m.queue = p_queue AND m.group_id = p_group_id
     ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
    IF p_drop_head THEN
        IF v_head IS NOT NULL THEN
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_purge_v1(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_groups text[];
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_queue, 70677176));
    v_groups := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                       WHERE g.queue = p_queue
                       ORDER BY g.group_id
                         FOR UPDATE);
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
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_claim_v2(
    p_queue text, p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_holder text, p_now double precision)
RETURNS TABLE (group_id text, message_id bigint, event text, token text, priority integer,
               attempt integer, expires_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_after_until double precision := '-Infinity';
    v_after_group text := '';
    v_leased text[] := '{}';
    v_rows integer;
    v_cand record;
    v_got integer := 0;
    v_row record;
BEGIN
    -- Scheduled messages due by now join their groups first (pgque_promote_v1).
    PERFORM pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now);
    LOOP
        v_rows := 0;
        FOR v_cand IN
            SELECT * FROM pgque_fifo.pgque_candidates_v2(
                p_queue, p_n - v_got, p_min_priority, v_now, v_after_until, v_after_group,
                v_leased)
        LOOP
            v_rows := v_rows + 1;
            v_after_until := v_cand.sort_until;
            v_after_group := v_cand.group_id;
            FOR v_row IN
                SELECT * FROM pgque_fifo.pgque_lease_group_v3(
                    p_queue, v_cand.group_id, p_visibility, p_max_attempts, p_on_exhausted,
                    p_min_priority, p_holder, v_now)
            LOOP
                group_id := v_row.group_id;
                message_id := v_row.message_id;
                event := v_row.event;
                token := v_row.token;
                priority := v_row.priority;
                attempt := v_row.attempt;
                expires_at := v_row.expires_at;
                RETURN NEXT;
                v_got := v_got + 1;
                v_leased := v_leased || v_cand.group_id;
            END LOOP;
        END LOOP;
        EXIT WHEN v_rows = 0 OR v_got >= p_n;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_settle_claim_v1(
    p_queue text, p_outcomes text[], p_group_ids text[], p_message_ids bigint[],
    p_tokens text[], p_delays double precision[], p_reasons text[], p_errors text[],
    p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_holders text[], p_now double precision)
RETURNS TABLE (settled boolean[], group_id text, message_id bigint, event text, token text,
               priority integer, attempt integer, expires_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_count integer := COALESCE(cardinality(p_outcomes), 0);
    v_out boolean[] := '{}';
    v_row record;
    v_i integer;
    v_after_until double precision := '-Infinity';
    v_after_group text := '';
    v_leased text[] := '{}';
    v_rows integer;
    v_cand record;
    v_got integer := 0;
BEGIN
    IF COALESCE(cardinality(p_group_ids), 0) <> v_count
       OR COALESCE(cardinality(p_message_ids), 0) <> v_count
       OR COALESCE(cardinality(p_tokens), 0) <> v_count
       OR COALESCE(cardinality(p_delays), 0) <> v_count
       OR COALESCE(cardinality(p_reasons), 0) <> v_count
       OR COALESCE(cardinality(p_errors), 0) <> v_count THEN
        RAISE EXCEPTION 'pgque: % outcomes but arrays of other lengths', v_count;
    END IF;
    FOR v_row IN
        SELECT u.g, u.m, u.t
          FROM unnest(p_group_ids, p_message_ids, p_tokens) WITH ORDINALITY AS u(g, m, t, n)
         ORDER BY u.g COLLATE "C", u.n
    LOOP
        PERFORM pgque_fifo.pgque_held_v1(p_queue, v_row.g, v_row.m, v_row.t);
    END LOOP;
    FOR v_i IN 1 .. v_count LOOP
        v_out[v_i] := CASE p_outcomes[v_i]
            WHEN 'ack' THEN pgque_fifo.pgque_ack_v1(
                p_queue, p_group_ids[v_i], p_message_ids[v_i], p_tokens[v_i], v_now)
            WHEN 'nack' THEN pgque_fifo.pgque_nack_v2(
                p_queue, p_group_ids[v_i], p_message_ids[v_i], p_tokens[v_i], p_delays[v_i],
                p_errors[v_i], v_now)
            WHEN 'release' THEN pgque_fifo.pgque_release_lease_v1(
                p_queue, p_group_ids[v_i], p_message_ids[v_i], p_tokens[v_i], v_now)
            WHEN 'dead_letter' THEN pgque_fifo.pgque_dead_letter_v2(
                p_queue, p_group_ids[v_i], p_message_ids[v_i], p_tokens[v_i], p_reasons[v_i],
                p_errors[v_i], v_now)
        END;
        IF v_out[v_i] IS NULL THEN
            RAISE EXCEPTION 'pgque: unknown settlement outcome %', p_outcomes[v_i];
        END IF;
    END LOOP;
    settled := v_out;
    RETURN NEXT;
    settled := NULL;
    -- Scheduled messages due by now join their groups before the claim (pgque_promote_v1;
    -- it never waits for a group lock, so the settled rows held above cannot close a cycle).
    IF p_n > 0 THEN
        PERFORM pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now);
    END IF;
    -- The claim: pgque_claim_v2's rounds, with lease i labelled p_holders[i] (a worker filling
    -- several slots at once names each slot; NULL or a shorter array leaves the rest NULL).
    WHILE v_got < p_n LOOP
        v_rows := 0;
        FOR v_cand IN
            SELECT * FROM pgque_fifo.pgque_candidates_v2(
                p_queue, p_n - v_got, p_min_priority, v_now, v_after_until, v_after_group,
                v_leased)
        LOOP
            v_rows := v_rows + 1;
            v_after_until := v_cand.sort_until;
            v_after_group := v_cand.group_id;
            FOR v_row IN
                SELECT * FROM pgque_fifo.pgque_lease_group_v3(
                    p_queue, v_cand.group_id, p_visibility, p_max_attempts, p_on_exhausted,
                    p_min_priority, p_holders[v_got + 1], v_now)
            LOOP
                group_id := v_row.group_id;
                message_id := v_row.message_id;
                event := v_row.event;
                token := v_row.token;
                priority := v_row.priority;
                attempt := v_row.attempt;
                expires_at := v_row.expires_at;
                RETURN NEXT;
                v_got := v_got + 1;
                v_leased := v_leased || v_cand.group_id;
            END LOOP;
        END LOOP;
        EXIT WHEN v_rows = 0;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_redrive_v2(
    p_queue text, p_ids bigint[], p_in_place boolean, p_now double precision)
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
    IF NOT p_in_place THEN
        RETURN pgque_fifo.pgque_redrive_v1(p_queue, p_ids, p_now);
    END IF;
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_pause_v1(p_queue text, p_group_id text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_paused boolean;
    v_drained boolean;
    v_head_priority smallint;
BEGIN
    LOOP
        SELECT g.paused, g.drained INTO v_paused, v_drained FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR NO KEY UPDATE;
        IF FOUND THEN
            IF v_paused THEN
                RETURN false;
            END IF;
            IF NOT v_drained THEN
                UPDATE pgque_fifo.groups g SET paused = true
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
                RETURN true;
            END IF;
            SELECT m.priority INTO v_head_priority FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND m.group_id = p_group_id
             ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
            IF FOUND THEN
                UPDATE pgque_fifo.groups g
                   SET paused = true, drained = false, priority = v_head_priority
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
            ELSE
                UPDATE pgque_fifo.groups g
                   SET paused = true, priority = 0, until = NULL, token = NULL,
                       leased_id = NULL, holder = NULL, blocked = false
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
            END IF;
            RETURN true;
        END IF;
        INSERT INTO pgque_fifo.groups (queue, group_id, priority, paused, drained)
        VALUES (p_queue, p_group_id, 0, true, true)
        ON CONFLICT (queue, group_id) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        -- A publish created the row meanwhile (or a drain deleted it): look again.
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_resume_v1(p_queue text, p_group_id text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_paused boolean;
BEGIN
    SELECT g.paused INTO v_paused FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT v_paused THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                    WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
        PERFORM 1 FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            UPDATE pgque_fifo.groups g
               SET paused = false, token = NULL, leased_id = NULL, holder = NULL, until = NULL,
                   blocked = false, priority = 4, drained = true
             WHERE g.queue = p_queue AND g.group_id = p_group_id;
            RETURN true;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
            DELETE FROM pgque_fifo.groups g WHERE g.queue = p_queue AND g.group_id = p_group_id;
            RETURN true;
        END IF;
    END IF;
    UPDATE pgque_fifo.groups g
       SET paused = false, drained = false,
           priority = CASE WHEN g.drained
                           THEN (SELECT m.priority FROM pgque_fifo.messages m
                                  WHERE m.queue = p_queue AND m.group_id = p_group_id
                                  ORDER BY COALESCE(m.seq, m.id) LIMIT 1)
                           ELSE g.priority END
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_group_info_v1(
    p_queue text, p_group_id text, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE sql STABLE AS $$
    SELECT g.group_id,
           CASE WHEN g.paused THEN 'paused'
                WHEN g.blocked THEN 'blocked'
                WHEN g.token IS NOT NULL AND g.until > p_now THEN 'leased'
                WHEN g.token IS NULL AND g.until > p_now THEN 'parked'
                ELSE 'ready' END,
           (SELECT count(*) FROM pgque_fifo.messages m
             WHERE m.queue = g.queue AND m.group_id = g.group_id),
           CASE WHEN g.drained AND h.id IS NOT NULL THEN h.priority ELSE g.priority END,
           h.id, h.enqueued_at, COALESCE(h.attempts, 0),
           CASE WHEN g.token IS NOT NULL THEN g.until END,
           CASE WHEN g.token IS NOT NULL THEN g.holder END,
           CASE WHEN g.token IS NULL AND g.until > p_now THEN g.until END,
           h.last_error
      FROM pgque_fifo.groups g
      LEFT JOIN LATERAL (
          SELECT m.id, m.enqueued_at, m.attempts, m.priority, m.last_error
            FROM pgque_fifo.messages m
           WHERE m.queue = g.queue AND m.group_id = g.group_id
           ORDER BY COALESCE(m.seq, m.id)
           LIMIT 1) AS h ON true
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       AND (NOT g.drained OR g.paused OR h.id IS NOT NULL)
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_group_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    -- As if the group's scheduled messages due by now had joined: they join now.
    PERFORM pgque_fifo.pgque_promote_group_v1(p_queue, p_group_id, v_now);
    RETURN QUERY SELECT * FROM pgque_fifo.pgque_group_info_v1(p_queue, p_group_id, v_now);
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_groups_v1(
    p_queue text, p_state text, p_limit integer, p_after text, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_ids text[];
BEGIN
    -- As if every scheduled message due by now had joined: they join now, in batches, never
    -- waiting (pgque_promote_v1); nothing is written in a read-only transaction (a hot
    -- standby), where a due message shows once a writer moved it in.
    IF current_setting('transaction_read_only') <> 'on' THEN
        LOOP
            EXIT WHEN pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now) = 0;
        END LOOP;
    END IF;
    v_ids := pgque_fifo.pgque_group_page_v1(p_queue, p_state, p_limit, COALESCE(p_after, ''),
                                            v_now);
    RETURN QUERY
        SELECT i.group_id, i.state, i.depth, i.priority, i.head_message_id, i.head_enqueued_at,
               i.head_attempts, i.lease_expires_at, i.lease_holder, i.resume_at, i.last_error
          FROM unnest(v_ids) WITH ORDINALITY AS u(id, n)
         CROSS JOIN LATERAL pgque_fifo.pgque_group_info_v1(p_queue, u.id, v_now) AS i
         ORDER BY u.n;
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
    v_worker_fns text[] := ARRAY['pgque_claim_v1', 'pgque_claim_v2', 'pgque_ack_v1',
                                 'pgque_ack_many_v1', 'pgque_nack_v1', 'pgque_nack_v2',
                                 'pgque_release_lease_v1', 'pgque_extend_v1',
                                 'pgque_dead_letter_v1', 'pgque_dead_letter_v2',
                                 'pgque_settle_claim_v1', 'pgque_stats_v1', 'pgque_stats_v2',
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


-- Schedule one message: it joins p_group_id's tail at now + p_delay (p_delay > 0) with the id
-- returned now, drawn from the messages' id sequence. Holds the queue's lock (shared) like a
-- publish, so a purge runs wholly before or after it; no group lock: nothing is appended yet.
-- Notifies the queue's channel so a waiting worker re-caps its wait at the new due time.
CREATE FUNCTION pgque_fifo.pgque_schedule_v1(
    p_queue text, p_group_id text, p_event text, p_priority integer, p_delay double precision,
    p_now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
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
    INSERT INTO pgque_fifo.scheduled (id, queue, group_id, event, priority, due_at, enqueued_at)
    VALUES (nextval('pgque_fifo.messages_id_seq'::regclass), p_queue, p_group_id,
            p_event, p_priority, v_now + p_delay, v_now)
    RETURNING id INTO v_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_id;
END
$$;

-- Schedule many messages with one due time, atomically; ids in item order (drawn, then sorted
-- and given out by item number).
CREATE FUNCTION pgque_fifo.pgque_schedule_many_v1(
    p_queue text, p_group_ids text[], p_events text[], p_priority integer,
    p_delay double precision, p_now double precision)
RETURNS bigint[] LANGUAGE plpgsql AS $$
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
    INSERT INTO pgque_fifo.scheduled (id, queue, group_id, event, priority, due_at, enqueued_at)
    SELECT v_ids[u.n], p_queue, u.g, u.e, p_priority, v_now + p_delay, v_now
      FROM unnest(p_group_ids, p_events) WITH ORDINALITY AS u(g, e, n);
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_ids;
END
$$;

-- Drop a scheduled message that is not due yet; false if it is due (joined or not), unknown
-- or not of this queue. Locks that one row (waiting for a claim that is moving it in, which
-- then finds it gone or, once the claim commits, the cancel finds nothing).
CREATE FUNCTION pgque_fifo.pgque_cancel_v1(p_queue text, p_id bigint, p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
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
LANGUAGE plpgsql STABLE AS $$
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

-- Publish tick p_tick of schedule entry p_entry once: if the queue has no tick of the entry at
-- or after p_tick, record p_tick and publish the event (pgque_publish_v1) in this one
-- transaction; returns its id, or NULL (nothing changed). Of concurrent callers with one tick
-- the first to write the tick row publishes; the others wait for its commit and find the tick
-- taken (or, if it rolled back, take it themselves). Lock order: the queue's lock (shared,
-- first, as a purge takes it exclusively before the tick rows), the tick row, then the
-- group's locks (pgque_lock_group_v1).
CREATE FUNCTION pgque_fifo.pgque_publish_tick_v1(
    p_queue text, p_entry text, p_tick double precision, p_group_id text, p_event text,
    p_priority integer, p_now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
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
    RETURN pgque_fifo.pgque_publish_v1(p_queue, p_group_id, p_event, p_priority, p_now);
END
$$;

-- The last tick of p_entry published into p_queue, or NULL.
CREATE FUNCTION pgque_fifo.pgque_last_tick_v1(p_queue text, p_entry text)
RETURNS double precision LANGUAGE sql STABLE AS $$
    SELECT t.tick FROM pgque_fifo.ticks t WHERE t.queue = p_queue AND t.entry = p_entry
$$;

-- When an idle worker's wait must end: due_now (a scheduled message is due by p_now but has not
-- joined its group yet: a claim lets it in, unless its group's lock is held, see
-- pgque_promote_v1) and due_in, the seconds from p_now until the next scheduled message that
-- is not due yet falls due (NULL if none). Two descents of scheduled_due.
CREATE FUNCTION pgque_fifo.pgque_next_due_v1(p_queue text, p_now double precision)
RETURNS TABLE (due_now boolean, due_in double precision)
LANGUAGE plpgsql STABLE AS $$
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

-- pgque_stats_v2 with scheduled (not due by p_now) and next_due_at, counted as if every due
-- scheduled message had joined its group: due ones count in messages (and their groups in
-- groups, if not a group yet), their due time as their enqueue time in oldest_age_s.
CREATE FUNCTION pgque_fifo.pgque_stats_v3(p_queue text, p_now double precision)
RETURNS TABLE (groups bigint, messages bigint, in_flight bigint, parked bigint, blocked bigint,
               dead_letters bigint, oldest_age_s double precision,
               next_resume_at double precision, paused bigint, scheduled bigint,
               next_due_at double precision)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_due bigint;
    v_oldest_due double precision;
BEGIN
    SELECT s.groups, s.messages, s.in_flight, s.parked, s.blocked, s.dead_letters,
           s.oldest_age_s, s.next_resume_at, s.paused
      INTO groups, messages, in_flight, parked, blocked, dead_letters, oldest_age_s,
           next_resume_at, paused
      FROM pgque_fifo.pgque_stats_v2(p_queue, v_now) AS s;
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

-- A partition slot count is kept while the queue has scheduled messages too (they were
-- routed under it).
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_partition_reset_slots_v1(p_queue text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_queue, 70677176));
    PERFORM 1 FROM pgque_fifo.partition_slots s WHERE s.queue = p_queue FOR UPDATE;
    -- Scheduled messages were routed under the old count too: they would join after a reset.
    IF EXISTS (SELECT 1 FROM pgque_fifo.messages m WHERE m.queue = p_queue)
       OR EXISTS (SELECT 1 FROM pgque_fifo.scheduled s WHERE s.queue = p_queue) THEN
        RETURN false;
    END IF;
    DELETE FROM pgque_fifo.partition_slots s WHERE s.queue = p_queue;
    RETURN FOUND;
END
$$;

-- The operator view shows scheduled messages too (and queues that hold only those).
CREATE OR REPLACE VIEW pgque_fifo.queue_stats AS
SELECT q.queue, s.groups, s.messages, s.in_flight, s.parked, s.blocked, s.dead_letters,
       s.oldest_age_s, to_timestamp(s.next_resume_at) AS next_resume_at, s.paused,
       s.scheduled, to_timestamp(s.next_due_at) AS next_due_at
  FROM (SELECT g.queue FROM pgque_fifo.groups g
        UNION
        SELECT d.queue FROM pgque_fifo.dead_letters d
        UNION
        SELECT k.queue FROM pgque_fifo.scheduled k) AS q
 CROSS JOIN LATERAL pgque_fifo.pgque_stats_v3(q.queue, NULL) AS s;

-- New functions are executable by PUBLIC until revoked (migration 0005's REVOKE covered only
-- what existed then).
REVOKE ALL ON FUNCTION pgque_fifo.pgque_join_due_v1(text, text, double precision, integer)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_promote_v1(text, integer, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_promote_one_v1(text, text, double precision, integer)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_lock_join_v1(text, text, integer, double precision)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_promote_group_v1(text, text, double precision)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_schedule_v1(
    text, text, text, integer, double precision, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_schedule_many_v1(
    text, text[], text[], integer, double precision, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_cancel_v1(text, bigint, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_scheduled_v1(text, integer, bigint, double precision)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_publish_tick_v1(
    text, text, double precision, text, text, integer, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_last_tick_v1(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_next_due_v1(text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_stats_v3(text, double precision) FROM PUBLIC;

REVOKE ALL ON FUNCTION pgque_fifo.pgque_share_group_v1(text, text) FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_share_group_v1(text, text) SET lock_timeout = '20ms';

-- CREATE OR REPLACE resets SECURITY DEFINER and SET: pin the replaced ones again.
ALTER FUNCTION pgque_fifo.pgque_publish_v1(text, text, text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_publish_many_v1(text, text[], text[], integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_redrive_v1(text, bigint[], double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_unblock_v1(text, text, boolean, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_purge_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_claim_v2(
    text, integer, double precision, integer, integer, text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_redrive_v2(text, bigint[], boolean, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_pause_v1(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_resume_v1(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_group_v1(text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_groups_v1(text, text, integer, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_settle_claim_v1(
    text, text[], text[], bigint[], text[], double precision[], text[], text[], integer,
    double precision, integer, integer, text, text[], double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_partition_reset_slots_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
-- Migration 0010: the entry points of scheduling (issue 17).
ALTER FUNCTION pgque_fifo.pgque_schedule_v1(
    text, text, text, integer, double precision, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_schedule_many_v1(
    text, text[], text[], integer, double precision, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_cancel_v1(text, bigint, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_scheduled_v1(text, integer, bigint, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_publish_tick_v1(
    text, text, double precision, text, text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_last_tick_v1(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_next_due_v1(text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_stats_v3(text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

-- Roles set up before this migration keep working without a second role setup (as in
-- migration 0009): where roles exist, the new tables and functions go to the owner of the
-- older entry points (the admin role), and each producer / worker role gets the new entry
-- points of its kind. A database without roles is left as it is.
DO $$
DECLARE
    v_admin oid;
    v_fn regprocedure;
    v_role oid;
    v_kind record;
BEGIN
    SELECT p.proowner INTO v_admin FROM pg_catalog.pg_proc p
     WHERE p.oid = 'pgque_fifo.pgque_claim_v1(text, integer, double precision, integer,'
                   ' integer, text, double precision)'::regprocedure;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace = 'pgque_fifo'::regnamespace
           AND p.proname IN ('pgque_claim_v1', 'pgque_publish_v1')
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    ) THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE pgque_fifo.scheduled OWNER TO %I',
                   (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = v_admin));
    EXECUTE format('ALTER TABLE pgque_fifo.ticks OWNER TO %I',
                   (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = v_admin));
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace AND p.proowner <> v_admin
                 ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn,
                       (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = v_admin));
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
    FOR v_kind IN SELECT * FROM (VALUES
        ('pgque_publish_v1', ARRAY['pgque_schedule_v1', 'pgque_schedule_many_v1',
                                   'pgque_cancel_v1', 'pgque_scheduled_v1',
                                   'pgque_publish_tick_v1', 'pgque_last_tick_v1']),
        ('pgque_claim_v1', ARRAY['pgque_stats_v3', 'pgque_next_due_v1'])) AS k(marker, fns)
    LOOP
        FOR v_role IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc p,
                             LATERAL pg_catalog.aclexplode(p.proacl) a
                       WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                         AND p.proname = v_kind.marker AND a.privilege_type = 'EXECUTE'
                         AND a.grantee <> p.proowner AND a.grantee <> 0
                       ORDER BY a.grantee LOOP
            FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                         WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                           AND p.proname = ANY (v_kind.fns) ORDER BY p.oid LOOP
                EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn,
                               (SELECT r.rolname FROM pg_catalog.pg_roles r
                                 WHERE r.oid = v_role));
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (10, 'scheduled messages');
