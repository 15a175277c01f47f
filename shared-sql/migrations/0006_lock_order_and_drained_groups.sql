-- Migration 0006: one lock order and drained groups (issue: no deadlock, no orphan, no phantom
-- group under any interleaving of two operations).
--
-- * Lock order. Every function that locks several rows takes them in one order, written in
--   docs/postgres.md: the queue's advisory lock (shared by every publish, exclusive for purge
--   and the slot reset); a dedup key row; then per group, in group-id byte order (COLLATE "C"),
--   the group's advisory lock and then its row; then dead-letter rows in id order; message rows
--   only under their group's row. A purge no longer runs through the middle of a publish (it
--   purged half of a publish_many). pgque_purge_v1 now locks the group rows before it deletes
--   anything (it orphaned a message racing a publish, and deadlocked with a claim);
--   pgque_redrive_v1 locks groups in group order, not dead-letter order (it deadlocked with
--   publish_many and with another redrive); pgque_publish_dedup_v1 reaps expired keys last
--   (two dedup publishes deadlocked on keys each had reaped). The group advisory lock uses a
--   64-bit hash, so a collision can no longer take two groups' locks out of order.
-- * Drained groups. A drain that finds a publish in flight (it holds the row FOR KEY SHARE)
--   marks the row drained instead of leaving a served, stale row behind: stats do not count it,
--   a claim reaches it first and either adopts the priority of its first message (now recorded
--   on every message) as a new, never-served group, or deletes it once nobody holds it. That is
--   what the reference model does when the publish commits or rolls back after the drain.
-- Entry points keep their names and signatures (bodies replaced); the helper
-- pgque_lease_group_v1 becomes pgque_lease_group_v2 (it takes the claim's priority floor).

ALTER TABLE pgque_fifo.groups ADD COLUMN drained boolean NOT NULL DEFAULT false;
ALTER TABLE pgque_fifo.messages ADD COLUMN priority smallint NOT NULL DEFAULT 0;

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
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_lock_group_v1(p_queue text, p_group_id text, p_priority integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    PERFORM pg_advisory_xact_lock(hashtextextended(p_queue || chr(31) || p_group_id, 70677175));
    LOOP
        PERFORM 1 FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR KEY SHARE;
        IF FOUND THEN
            RETURN;
        END IF;
        -- Our own uncommitted row is invisible to every other transaction until we commit.
        INSERT INTO pgque_fifo.groups (queue, group_id, priority)
        VALUES (p_queue, p_group_id, p_priority)
        ON CONFLICT (queue, group_id) DO NOTHING;
        IF FOUND THEN
            RETURN;
        END IF;
        -- Another publish created the row meanwhile (or a drain deleted it): look again.
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_v1(
    p_queue text, p_group_id text, p_event text, p_priority integer, p_now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    PERFORM pgque_fifo.pgque_lock_group_v1(p_queue, p_group_id, p_priority);
    INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority)
    VALUES (p_queue, p_group_id, p_event,
            COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision), p_priority)
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
    -- Lock the groups in one global order so two batches never wait on each other in a cycle.
    FOR v_group IN
        SELECT DISTINCT u.g COLLATE "C" FROM unnest(p_group_ids) AS u(g) ORDER BY 1
    LOOP
        PERFORM pgque_fifo.pgque_lock_group_v1(p_queue, v_group, p_priority);
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

-- Free a group whose head was just settled (ack, dead_letter, operator drop) or that was found
-- empty by a claim: drop the row if the group has drained, else clear the lease and set until
-- to now (the round-robin key: served now, so it queues behind groups served earlier).
-- A drained group whose row a publish in flight holds (FOR KEY SHARE) cannot be dropped without
-- waiting for that publish, and claims and acks never wait on a publisher. The row is marked
-- drained instead: the group is gone (stats do not count it) and the publish, if it commits,
-- makes a new one, as the model has it: never served (until NULL) and with the priority of its
-- first message (messages.priority; the row says 4 meanwhile so every claim floor reaches it).
-- The first claim to reach the row adopts that priority (pgque_lease_group_v2) or, once
-- nobody holds it and it is still empty (the publish rolled back), deletes it.
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_release_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                    WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
        -- SKIP LOCKED: never wait, so no deadlock. Once we hold the row, later publishes wait
        -- for us; look again with a fresh snapshot for one that committed in between.
        PERFORM 1 FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            UPDATE pgque_fifo.groups g
               SET token = NULL, until = NULL, blocked = false, priority = 4, drained = true
             WHERE g.queue = p_queue AND g.group_id = p_group_id AND NOT g.drained;
            RETURN;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
            DELETE FROM pgque_fifo.groups g WHERE g.queue = p_queue AND g.group_id = p_group_id;
            RETURN;
        END IF;
    END IF;
    -- A drained row keeps its "never served" place until a claim adopts it.
    UPDATE pgque_fifo.groups g
       SET token = NULL, until = CASE WHEN g.drained THEN NULL ELSE p_now END
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
END
$$;

-- Lease the head of one group the caller has locked. A drained row (see pgque_release_v1) first
-- becomes the new group its first message made: that message's priority, never served; if that
-- priority is below p_min_priority nothing is leased. An exhausted head (attempts >=
-- max_attempts) is dead-lettered and the next one tried, or the group is blocked. Returns no
-- row when nothing was leased (group drained, blocked or below the floor).
CREATE FUNCTION pgque_fifo.pgque_lease_group_v2(
    p_queue text, p_group_id text, p_visibility double precision, p_max_attempts integer,
    p_on_exhausted text, p_min_priority integer, p_now double precision)
RETURNS TABLE (group_id text, message_id bigint, event text, token text, priority integer,
               attempt integer, expires_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_drained boolean;
    v_id bigint;
    v_event text;
    v_attempts integer;
    v_head_priority smallint;
    v_token text;
    v_priority smallint;
BEGIN
    LOOP
        SELECT g.drained, h.id, h.event, h.attempts, h.priority
          INTO v_drained, v_id, v_event, v_attempts, v_head_priority
          FROM pgque_fifo.groups g
          LEFT JOIN LATERAL (
              SELECT m.id, m.event, m.attempts, m.priority FROM pgque_fifo.messages m
               WHERE m.queue = g.queue AND m.group_id = g.group_id
               ORDER BY m.id
               LIMIT 1) AS h ON true
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
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
                UPDATE pgque_fifo.groups g SET blocked = true, token = NULL
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
                RETURN;
            END IF;
            PERFORM pgque_fifo.pgque_bury_v1(p_queue, p_group_id, v_id, 'max_attempts exhausted',
                                             p_now);
            CONTINUE;
        END IF;
        UPDATE pgque_fifo.messages m SET attempts = m.attempts + 1 WHERE m.id = v_id;
        v_token := replace(gen_random_uuid()::text, '-', '');
        UPDATE pgque_fifo.groups g SET token = v_token, until = p_now + p_visibility
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

-- Lease the heads of up to p_n distinct groups in claim order: smallest (COALESCE(until, 0),
-- group_id), group ids compared by code point. One round trip; each group at most once.
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_claim_v1(
    p_queue text, p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_now double precision)
RETURNS TABLE (group_id text, message_id bigint, event text, token text, priority integer,
               attempt integer, expires_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_seen text[] := '{}';
    v_batch text[];
    v_group text;
    v_got integer := 0;
    v_row record;
BEGIN
    LOOP
        v_batch := pgque_fifo.pgque_candidates_v1(p_queue, p_n - v_got, p_min_priority, v_now,
                                                  v_seen);
        EXIT WHEN cardinality(v_batch) = 0;
        FOREACH v_group IN ARRAY v_batch LOOP
            v_seen := v_seen || v_group;
            FOR v_row IN
                SELECT * FROM pgque_fifo.pgque_lease_group_v2(
                    p_queue, v_group, p_visibility, p_max_attempts, p_on_exhausted,
                    p_min_priority, v_now)
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
            END LOOP;
        END LOOP;
        EXIT WHEN v_got >= p_n;
    END LOOP;
END
$$;

-- Publish dead letters (all of the queue when p_ids is NULL) again at their groups' tails, in
-- dead-letter id order, with the priority they were recorded with; unknown ids are ignored.
-- Locks in the documented order: each group's advisory lock and row in group-id byte order
-- (as publish_many does), then the dead-letter rows in id order. A dead letter that another
-- redrive or a purge took meanwhile is gone by then and skipped: a group left with nothing to
-- receive is dropped again if it is empty, and a new group whose first dead letter went
-- elsewhere takes the priority of the first one it does receive.
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
        PERFORM pgque_fifo.pgque_lock_group_v1(p_queue, v_row.group_id, v_row.priority);
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
           AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                            WHERE m.queue = g.queue AND m.group_id = g.group_id);
    END IF;
    UPDATE pgque_fifo.groups g SET priority = f.priority
      FROM unnest(v_got, v_first_ids, v_first_priorities) AS f(group_id, id, priority)
     WHERE g.queue = p_queue AND g.group_id = f.group_id AND g.priority <> f.priority
       AND NOT g.drained
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = f.group_id AND m.id < f.id);
    IF v_count > 0 THEN
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_stats_v1(p_queue text, p_now double precision)
RETURNS TABLE (groups bigint, messages bigint, in_flight bigint, parked bigint, blocked bigint,
               dead_letters bigint, oldest_age_s double precision,
               next_resume_at double precision)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    -- A drained row (pgque_release_v1) is a group only once a message of its own has arrived.
    SELECT count(*) FILTER (WHERE NOT g.drained
                               OR EXISTS (SELECT 1 FROM pgque_fifo.messages m
                                           WHERE m.queue = g.queue AND m.group_id = g.group_id)),
           count(*) FILTER (WHERE NOT g.blocked AND g.until > v_now AND g.token IS NOT NULL),
           count(*) FILTER (WHERE NOT g.blocked AND g.until > v_now AND g.token IS NULL),
           count(*) FILTER (WHERE g.blocked),
           min(g.until) FILTER (WHERE NOT g.blocked AND g.until > v_now AND g.token IS NULL)
      INTO groups, in_flight, parked, blocked, next_resume_at
      FROM pgque_fifo.groups g
     WHERE g.queue = p_queue;
    -- greatest() skips NULLs, so an empty queue must be spelt out: its age is NULL, not 0.
    SELECT count(*),
           CASE WHEN count(*) > 0 THEN greatest(0, v_now - min(m.enqueued_at)) END
      INTO messages, oldest_age_s
      FROM pgque_fifo.messages m
     WHERE m.queue = p_queue;
    SELECT count(*) INTO dead_letters FROM pgque_fifo.dead_letters d WHERE d.queue = p_queue;
    RETURN NEXT;
END
$$;

-- Delete every message, group and dead letter of one queue. Locks in the documented order:
-- the queue's lock exclusively (it waits for every publish in flight into the queue, which
-- holds it shared, and new publishes wait for the purge), then the group rows in group-id byte
-- order (waiting for the claims and acks holding them), then their messages, then the dead
-- letters in id order. No publish can add to a held group, so nothing is orphaned, and every
-- publish lands wholly before or wholly after the purge. Messages without a group row at all
-- (written by hand, or left by an older release) go too.
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
END
$$;

-- Publish unless p_dedup_key was published within its window: returns the new message id and
-- false, or the first publish's id and true (nothing appended). One statement, one
-- transaction: the key row and the message commit together. A concurrent publish of the same
-- key waits on the key row's unique index and then sees the committed row (deduplicated) or,
-- if the first transaction rolled back, publishes itself.
-- Lock order (docs/postgres.md): the queue's lock (shared), the key row, then the group's
-- advisory lock and row.
-- Expired keys are reaped last, when nothing is left to wait for: a reaped row stays locked
-- until commit, and a publisher that reaped a key before taking its own could hold the key
-- another publisher takes while waiting for the key that one reaped (a deadlock).
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_dedup_v1(
    p_queue text, p_group_id text, p_event text, p_priority integer,
    p_dedup_key text, p_ttl double precision, p_now double precision)
RETURNS TABLE (message_id bigint, deduped boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_taken boolean;
    v_id bigint;
BEGIN
    IF p_ttl IS NULL OR p_ttl <= 0 THEN
        RAISE EXCEPTION 'pgque: dedup ttl must be > 0, not %', p_ttl;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    -- Take the key: a new row, or an expired one taken over; 0 marks "publishing now".
    INSERT INTO pgque_fifo.dedup_keys AS d (queue, dedup_key, message_id, expires_at)
    VALUES (p_queue, p_dedup_key, 0, v_now + p_ttl)
    ON CONFLICT (queue, dedup_key) DO UPDATE
       SET message_id = 0, expires_at = EXCLUDED.expires_at
     WHERE d.expires_at <= v_now
    RETURNING true INTO v_taken;
    IF v_taken THEN
        v_id := pgque_fifo.pgque_publish_v1(p_queue, p_group_id, p_event, p_priority, v_now);
        UPDATE pgque_fifo.dedup_keys d SET message_id = v_id
         WHERE d.queue = p_queue AND d.dedup_key = p_dedup_key;
        message_id := v_id;
        deduped := false;
    ELSE
        SELECT d.message_id INTO message_id FROM pgque_fifo.dedup_keys d
         WHERE d.queue = p_queue AND d.dedup_key = p_dedup_key;
        deduped := true;
    END IF;
    PERFORM pgque_fifo.pgque_dedup_reap_v1(p_queue, 16, v_now);
    RETURN NEXT;
END
$$;

-- Delete the dedup keys and the slot count of one queue (tests, operators; pgque_purge_v1
-- deletes its messages). Keys are locked in key byte order, as every multi-row lock is.
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_partition_purge_v1(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgque_fifo.dedup_keys d
     WHERE d.ctid IN (SELECT k.ctid FROM pgque_fifo.dedup_keys k
                       WHERE k.queue = p_queue
                       ORDER BY k.dedup_key
                         FOR UPDATE);
    DELETE FROM pgque_fifo.partition_slots s WHERE s.queue = p_queue;
END
$$;

-- Forget the slot count of a drained queue (the resize cutover); false if it still has
-- messages or had no count. The queue's lock, taken exclusively, waits for publishes in flight
-- (a message not yet committed would otherwise be missed by the emptiness check).
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_partition_reset_slots_v1(p_queue text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_queue, 70677176));
    PERFORM 1 FROM pgque_fifo.partition_slots s WHERE s.queue = p_queue FOR UPDATE;
    IF EXISTS (SELECT 1 FROM pgque_fifo.messages m WHERE m.queue = p_queue) THEN
        RETURN false;
    END IF;
    DELETE FROM pgque_fifo.partition_slots s WHERE s.queue = p_queue;
    RETURN FOUND;
END
$$;

-- The helper lease_group_v2 replaced (it took no priority floor).
DROP FUNCTION pgque_fifo.pgque_lease_group_v1(
    text, text, double precision, integer, text, double precision);
REVOKE ALL ON FUNCTION pgque_fifo.pgque_lease_group_v2(
    text, text, double precision, integer, text, integer, double precision) FROM PUBLIC;

-- CREATE OR REPLACE resets SECURITY DEFINER and SET: pin them again (as migration 0005 did).
ALTER FUNCTION pgque_fifo.pgque_publish_v1(text, text, text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_publish_many_v1(text, text[], text[], integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_claim_v1(
    text, integer, double precision, integer, integer, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_redrive_v1(text, bigint[], double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_stats_v1(text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_purge_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_publish_dedup_v1(
    text, text, text, integer, text, double precision, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_partition_purge_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_partition_reset_slots_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (6, 'lock order and drained groups');
