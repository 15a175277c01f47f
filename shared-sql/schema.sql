-- pgque Postgres schema: FRESH INSTALL of the current version (see migrations/ for upgrades).
--
-- This file and the ordered files in migrations/ must produce the same database; a test applies
-- the migrations in order and compares the catalogs with a fresh install. When you change the
-- schema, add a migration AND update this file.
--
-- Everything lives in the schema pgque_fifo (not "pgque", which the PgQue SQL engine uses), one
-- set of tables for all queues, with the queue name as a column. Functions carry a version in
-- their name (pgque_claim_v1) so an upgrade can ship pgque_claim_v2 beside the old one while
-- workers of the previous release still call v1. Times are epoch seconds (double precision):
-- every function takes p_now, NULL meaning "the server's clock" (clock_timestamp()); a value
-- is passed only by tests with an injected clock. Requires PostgreSQL 13 or newer
-- (gen_random_uuid() is built in from 13).

CREATE SCHEMA IF NOT EXISTS pgque_fifo;

CREATE TABLE pgque_fifo.schema_version (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per group that has messages: the lease and the round-robin key.
--   token    the fencing token of the live lease; NULL while nobody holds the group
--   until    lease expiry while leased, park end after nack(delay), time of last service after
--            ack; NULL for a group never served. Claimable: NOT blocked AND COALESCE(until,0)<=now
--   priority fixed by the publish that created the row (0-4)
--   blocked  set when a head exhausts max_attempts under on_exhausted = 'block'
--   drained  the group drained while a publish into it was in flight (pgque_release_v1): not
--            a group until a message of its own arrives; a claim then adopts it or deletes it
-- Churn: every claim, ack and nack rewrites the row and, because until is indexed, none of those
-- updates can be HOT. The table stays small (one row per active group), so autovacuum is told
-- to visit it after a fixed number of dead rows instead of a fraction of the table
-- (scale_factor 0) and without cost-based sleeps, which keeps dead index entries from piling up
-- in front of the claim index. fillfactor 70 leaves room on each page so a new row version
-- usually lands on the page of the old one (fewer pages touched, a denser table to scan).
CREATE TABLE pgque_fifo.groups (
    queue    text COLLATE "C" NOT NULL,
    group_id text COLLATE "C" NOT NULL,
    token    text,
    until    double precision,
    priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 4),
    blocked  boolean NOT NULL DEFAULT false,
    drained  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (queue, group_id)
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.05
);

-- The claim order (COALESCE(until, 0), group_id) within a queue, served by an index so a claim
-- never sorts the table (the seed's index on the raw column could not serve the COALESCE). One
-- partial index per priority floor: the claim function runs a static query per min_priority
-- whose literal predicate matches exactly one of them. Blocked groups are left out of all.
CREATE INDEX groups_ready_p0 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked;
CREATE INDEX groups_ready_p1 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND priority >= 1;
CREATE INDEX groups_ready_p2 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND priority >= 2;
CREATE INDEX groups_ready_p3 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND priority >= 3;
CREATE INDEX groups_ready_p4 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND priority >= 4;

-- The FIFO of every group. id orders a group and is the lease's message id. Only attempts is
-- ever updated and it is not indexed, so that update is HOT when the page has room: hence
-- fillfactor 90. priority is the one its publish asked for: it becomes the group's when the
-- message is the first of a drained group (see groups.drained).
CREATE TABLE pgque_fifo.messages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text COLLATE "C" NOT NULL,
    group_id    text COLLATE "C" NOT NULL,
    event       text NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    enqueued_at double precision NOT NULL,
    priority    smallint NOT NULL DEFAULT 0
) WITH (fillfactor = 90);

CREATE INDEX messages_head ON pgque_fifo.messages (queue, group_id, id);

CREATE TABLE pgque_fifo.dead_letters (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text COLLATE "C" NOT NULL,
    group_id    text COLLATE "C" NOT NULL,
    message_id  bigint NOT NULL,
    event       text NOT NULL,
    priority    smallint NOT NULL,
    attempts    integer NOT NULL,
    reason      text NOT NULL,
    enqueued_at double precision NOT NULL,
    failed_at   double precision NOT NULL
);

CREATE INDEX dead_letters_queue ON pgque_fifo.dead_letters (queue, id);

-- @functions-v1 ---------------------------------------------------------------------------

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
CREATE FUNCTION pgque_fifo.pgque_lock_group_v1(p_queue text, p_group_id text, p_priority integer)
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

-- The LISTEN/NOTIFY channel of a queue: a fixed prefix and a hash, so every queue name gives a
-- valid channel name (38 characters; channel names are identifiers of at most 63 bytes).
CREATE FUNCTION pgque_fifo.pgque_channel_v1(p_queue text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'pgque_' || md5(p_queue)
$$;

CREATE FUNCTION pgque_fifo.pgque_publish_v1(
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

CREATE FUNCTION pgque_fifo.pgque_publish_many_v1(
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
CREATE FUNCTION pgque_fifo.pgque_release_v1(p_queue text, p_group_id text, p_now double precision)
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

-- Move one message to the dead letters, recording its group's priority.
CREATE FUNCTION pgque_fifo.pgque_bury_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_reason text, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        DELETE FROM pgque_fifo.messages m WHERE m.id = p_message_id
        RETURNING m.queue, m.group_id, m.id, m.event, m.attempts, m.enqueued_at
    )
    INSERT INTO pgque_fifo.dead_letters
        (queue, group_id, message_id, event, priority, attempts, reason, enqueued_at, failed_at)
    SELECT gone.queue, gone.group_id, gone.id, gone.event, g.priority, gone.attempts, p_reason,
           gone.enqueued_at, p_now
      FROM gone
      JOIN pgque_fifo.groups g ON g.queue = gone.queue AND g.group_id = gone.group_id;
END
$$;

-- Up to p_limit claimable groups in claim order after the cursor (p_after_until,
-- p_after_group), locked FOR NO KEY UPDATE, with each row's claim-order key (the next cursor);
-- rows another claim holds are skipped, so concurrent claimers take different groups. One
-- static query per priority floor: its literal predicate matches one partial index, which
-- serves the range (COALESCE(until, 0) <= now), the cursor (a row comparison on the index's
-- columns) and the order, so there is no sort. A claim's later rounds start after the rows
-- it already passed instead of rescanning them (with a list of rows to skip, K drained rows
-- with a publish in flight cost about K^3 comparisons). p_leased (at most the claim's n rows)
-- keeps a group the claim leased with visibility 0 from coming round again.
-- SKIP LOCKED does not cover everything: when the row version this statement's snapshot sees
-- carries a KEY SHARE lock of a publish still in flight and an update committed after the
-- snapshot, PostgreSQL takes the lock and then locks the newer versions too ("while locking
-- updated version ... of tuple"), waiting for whoever holds them whatever the wait policy. A
-- claim holds the rows it locked earlier (this round and before), and an ack_many, a purge or
-- another claim holding that newer version may be waiting for one of them: a deadlock (found
-- by the mixed stress run). So the scan runs under a short lock_timeout (set on the function,
-- below 1 s, PostgreSQL's default deadlock_timeout) inside a block that gives the round up:
-- a claim waits at most that long, rarely, and never closes a cycle.
CREATE FUNCTION pgque_fifo.pgque_candidates_v2(
    p_queue text, p_limit integer, p_min_priority integer, p_now double precision,
    p_after_until double precision, p_after_group text, p_leased text[])
RETURNS TABLE (group_id text, sort_until double precision) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_ids text[];
BEGIN
  BEGIN
    IF p_min_priority <= 0 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 1 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND g.priority >= 1
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 2 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND g.priority >= 2
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 3 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND g.priority >= 3
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSE
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND g.priority >= 4
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    END IF;
  EXCEPTION WHEN lock_not_available THEN
    -- Following an update chain outwaited this function's lock_timeout (see above): give up
    -- this round; its row locks go with the block, and the claim returns what it has. (The
    -- rows are returned only after the block, so none escapes it unlocked.)
    RETURN;
  END;
  -- The rows are locked: their claim-order keys cannot change under us.
  RETURN QUERY
      SELECT u.id, (SELECT COALESCE(g.until, 0) FROM pgque_fifo.groups g
                     WHERE g.queue = p_queue AND g.group_id = u.id)
        FROM unnest(v_ids) WITH ORDINALITY AS u(id, n);
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
CREATE FUNCTION pgque_fifo.pgque_claim_v1(
    p_queue text, p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_now double precision)
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
                SELECT * FROM pgque_fifo.pgque_lease_group_v2(
                    p_queue, v_cand.group_id, p_visibility, p_max_attempts, p_on_exhausted,
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
                v_leased := v_leased || v_cand.group_id;
            END LOOP;
        END LOOP;
        EXIT WHEN v_rows = 0 OR v_got >= p_n;
    END LOOP;
END
$$;

-- Fencing: lock the group row and tell whether (token, message id) is still the live lease,
-- even past its expiry, until another claim takes the group.
CREATE FUNCTION pgque_fifo.pgque_held_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id AND g.token = p_token
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN COALESCE((SELECT m.id FROM pgque_fifo.messages m
                      WHERE m.queue = p_queue AND m.group_id = p_group_id
                      ORDER BY m.id LIMIT 1) = p_message_id, false);
END
$$;

CREATE FUNCTION pgque_fifo.pgque_ack_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    DELETE FROM pgque_fifo.messages m WHERE m.id = p_message_id;
    PERFORM pgque_fifo.pgque_release_v1(
        p_queue, p_group_id,
        COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision));
    RETURN true;
END
$$;

-- Ack several leases; results in input order. Groups are visited in code-point order (input
-- order within a group) so two batches lock rows in the same order and cannot deadlock.
CREATE FUNCTION pgque_fifo.pgque_ack_many_v1(
    p_queue text, p_group_ids text[], p_message_ids bigint[], p_tokens text[],
    p_now double precision)
RETURNS boolean[] LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_out boolean[] := '{}';
    v_row record;
BEGIN
    FOR v_row IN
        SELECT u.g, u.m, u.t, u.n
          FROM unnest(p_group_ids, p_message_ids, p_tokens) WITH ORDINALITY AS u(g, m, t, n)
         ORDER BY u.g COLLATE "C", u.n
    LOOP
        v_out[v_row.n] := pgque_fifo.pgque_ack_v1(p_queue, v_row.g, v_row.m, v_row.t, v_now);
    END LOOP;
    RETURN v_out;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_nack_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_delay double precision,
    p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    UPDATE pgque_fifo.groups g
       SET token = NULL,
           until = COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision)
                   + p_delay
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    IF p_delay <= 0 THEN
        -- Claimable again now: wake an idle worker.
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN true;
END
$$;

-- Renew a held lease; returns the new expiry, or NULL when the lease is not held.
CREATE FUNCTION pgque_fifo.pgque_extend_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text,
    p_visibility double precision, p_now double precision)
RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    v_until double precision;
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN NULL;
    END IF;
    v_until := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision)
               + p_visibility;
    UPDATE pgque_fifo.groups g SET until = v_until
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    RETURN v_until;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_dead_letter_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_reason text,
    p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    PERFORM pgque_fifo.pgque_bury_v1(p_queue, p_group_id, p_message_id, p_reason, v_now);
    PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    RETURN true;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_dead_letters_v1(p_queue text, p_limit integer)
RETURNS TABLE (id bigint, group_id text, message_id bigint, event text, priority integer,
               attempts integer, reason text, failed_at double precision)
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.group_id, d.message_id, d.event, d.priority, d.attempts, d.reason,
           d.failed_at
      FROM pgque_fifo.dead_letters d
     WHERE d.queue = p_queue
     ORDER BY d.id
     LIMIT p_limit
$$;

-- Publish dead letters (all of the queue when p_ids is NULL) again at their groups' tails, in
-- dead-letter id order, with the priority they were recorded with; unknown ids are ignored.
-- Locks in the documented order: each group's advisory lock and row in group-id byte order
-- (as publish_many does), then the dead-letter rows in id order. A dead letter that another
-- redrive or a purge took meanwhile is gone by then and skipped: a group left with nothing to
-- receive is dropped again if it is empty, and a new group whose first dead letter went
-- elsewhere takes the priority of the first one it does receive.
CREATE FUNCTION pgque_fifo.pgque_redrive_v1(p_queue text, p_ids bigint[], p_now double precision)
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

-- Release a group blocked by on_exhausted = 'block': retry its head with a fresh attempt count,
-- or (p_drop_head) dead-letter the head. False when the group is not blocked.
CREATE FUNCTION pgque_fifo.pgque_unblock_v1(
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
     ORDER BY m.id LIMIT 1;
    IF p_drop_head THEN
        IF v_head IS NOT NULL THEN
            PERFORM pgque_fifo.pgque_bury_v1(p_queue, p_group_id, v_head,
                                             'dropped by operator (unblock)', v_now);
        END IF;
        PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    ELSE
        UPDATE pgque_fifo.messages m SET attempts = 0 WHERE m.id = v_head;
        UPDATE pgque_fifo.groups g SET token = NULL, until = v_now
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
    END IF;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_stats_v1(p_queue text, p_now double precision)
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
CREATE FUNCTION pgque_fifo.pgque_purge_v1(p_queue text)
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

-- @end-functions-v1 -----------------------------------------------------------------------

-- One row per queue, by the server's clock: what `pgque stats` shows, for dashboards and
-- alerts (SELECT * FROM pgque_fifo.queue_stats).
CREATE VIEW pgque_fifo.queue_stats AS
SELECT q.queue, s.groups, s.messages, s.in_flight, s.parked, s.blocked, s.dead_letters,
       s.oldest_age_s, to_timestamp(s.next_resume_at) AS next_resume_at
  FROM (SELECT g.queue FROM pgque_fifo.groups g
        UNION
        SELECT d.queue FROM pgque_fifo.dead_letters d) AS q
 CROSS JOIN LATERAL pgque_fifo.pgque_stats_v1(q.queue, NULL) AS s;

-- The partition-key layer (pgque.partition): the producer dedup window and the persisted slot
-- count of ordered (Tier B) queues.

-- One row per (queue, dedup key) published within its window. message_id is the message the
-- first publish appended; expires_at ends the window (epoch seconds). Expired rows are taken
-- over by the next publish of the same key, and reaped in small batches by every deduplicated
-- publish of the queue (pgque_dedup_reap_v1), so the table holds about one window of keys.
CREATE TABLE pgque_fifo.dedup_keys (
    queue      text COLLATE "C" NOT NULL,
    dedup_key  text COLLATE "C" NOT NULL,
    message_id bigint NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);

CREATE INDEX dedup_keys_expiry ON pgque_fifo.dedup_keys (queue, expires_at);

-- The slot count N of a queue whose keys are hashed to N slots; fixed by the first publisher
-- or consumer, so every producer routes a key to the same slot.
CREATE TABLE pgque_fifo.partition_slots (
    queue      text COLLATE "C" PRIMARY KEY,
    slots      integer NOT NULL CHECK (slots BETWEEN 1 AND 256),
    created_at double precision NOT NULL
);

-- @functions-partition-v1 -----------------------------------------------------------------

-- Delete up to p_limit expired dedup keys of one queue; returns how many. Rows another
-- transaction holds are skipped, so concurrent reapers never wait on each other.
CREATE FUNCTION pgque_fifo.pgque_dedup_reap_v1(
    p_queue text, p_limit integer, p_now double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_count integer;
BEGIN
    DELETE FROM pgque_fifo.dedup_keys d
     WHERE d.ctid IN (SELECT k.ctid FROM pgque_fifo.dedup_keys k
                       WHERE k.queue = p_queue AND k.expires_at <= v_now
                       ORDER BY k.expires_at
                       LIMIT p_limit
                         FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
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
-- another publisher takes while waiting for the key that one reaped (a deadlock). Inside a
-- caller's transaction (transaction_timestamp() differs from statement_timestamp()) the reaped
-- keys stay locked through the caller's later statements, so a later dedup publish of that
-- transaction could wait for a key another transaction holds while that one waits for a key
-- this one reaped. There the reap takes only keys below this publish's own key in byte
-- order: a transaction that takes its dedup keys in byte order (docs/postgres.md) then holds
-- reaped keys only below every key it will still wait for, so the key order has no cycle.
CREATE FUNCTION pgque_fifo.pgque_publish_dedup_v1(
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
    IF transaction_timestamp() = statement_timestamp() THEN
        PERFORM pgque_fifo.pgque_dedup_reap_v1(p_queue, 16, v_now);
    ELSE
        DELETE FROM pgque_fifo.dedup_keys d
         WHERE d.ctid IN (SELECT k.ctid FROM pgque_fifo.dedup_keys k
                           WHERE k.queue = p_queue AND k.expires_at <= v_now
                             AND k.dedup_key < p_dedup_key COLLATE "C"
                           ORDER BY k.expires_at
                           LIMIT 16
                             FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN NEXT;
END
$$;

-- Fix the slot count of p_queue on first use and return the count in force, which differs
-- from p_slots when the queue was set up with another count (the caller refuses that).
CREATE FUNCTION pgque_fifo.pgque_partition_slots_v1(
    p_queue text, p_slots integer, p_now double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_slots integer;
BEGIN
    INSERT INTO pgque_fifo.partition_slots (queue, slots, created_at)
    VALUES (p_queue, p_slots,
            COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision))
    ON CONFLICT (queue) DO NOTHING;
    SELECT s.slots INTO v_slots FROM pgque_fifo.partition_slots s WHERE s.queue = p_queue;
    RETURN v_slots;
END
$$;

-- Forget the slot count of a drained queue (the resize cutover); false if it still has
-- messages or had no count. The queue's lock, taken exclusively, waits for publishes in flight
-- (a message not yet committed would otherwise be missed by the emptiness check).
CREATE FUNCTION pgque_fifo.pgque_partition_reset_slots_v1(p_queue text)
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

-- Delete the dedup keys and the slot count of one queue (tests, operators; pgque_purge_v1
-- deletes its messages). Keys are locked in key byte order, as every multi-row lock is, and
-- deleted by the next statement: its fresh snapshot sees the version a dedup publish we waited
-- for committed (a DELETE by ctid in the locking statement's snapshot missed it).
CREATE FUNCTION pgque_fifo.pgque_partition_purge_v1(p_queue text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM pgque_fifo.dedup_keys k
     WHERE k.queue = p_queue
     ORDER BY k.dedup_key
       FOR UPDATE;
    DELETE FROM pgque_fifo.dedup_keys d WHERE d.queue = p_queue;
    DELETE FROM pgque_fifo.partition_slots s WHERE s.queue = p_queue;
END
$$;

-- @end-functions-partition-v1 -------------------------------------------------------------

INSERT INTO pgque_fifo.schema_version (version, name) VALUES
    (1, 'initial'),
    (2, 'churn tuning and operator view'),
    (3, 'partition keys'),
    (4, 'listen notify');

-- @least-privilege -----------------------------------------------------------------------

-- Least privilege (migration 0005). Every entry point runs with its owner's rights (SECURITY
-- DEFINER) and a pinned search_path, so a caller needs no privilege on the tables and cannot
-- plant a look-alike function or operator earlier on its own search_path. pg_temp comes last
-- so a temporary object can never shadow one of ours. Objects inside the bodies are
-- schema-qualified as well. The helpers the entry points call (lock_group, release, bury,
-- candidates, lease_group, held) stay SECURITY INVOKER: they run inside an entry point, with
-- its rights and its search_path, and nobody else may call them.
-- A new function in a later migration must follow the same rules: REVOKE EXECUTE from PUBLIC
-- (the REVOKE below covers only what exists now), SECURITY DEFINER with the pinned search_path
-- for an entry point, and a line in pgque_setup_roles_v1's lists.
ALTER FUNCTION pgque_fifo.pgque_publish_v1(text, text, text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_publish_many_v1(text, text[], text[], integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_claim_v1(
    text, integer, double precision, integer, integer, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_candidates_v2(
    text, integer, integer, double precision, double precision, text, text[])
    SET lock_timeout = '20ms';
ALTER FUNCTION pgque_fifo.pgque_ack_v1(text, text, bigint, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_ack_many_v1(text, text[], bigint[], text[], double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_nack_v1(
    text, text, bigint, text, double precision, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_extend_v1(
    text, text, bigint, text, double precision, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_dead_letter_v1(text, text, bigint, text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_dead_letters_v1(text, integer)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_redrive_v1(text, bigint[], double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_unblock_v1(text, text, boolean, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_stats_v1(text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_purge_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_dedup_reap_v1(text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_publish_dedup_v1(
    text, text, text, integer, text, double precision, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_partition_slots_v1(text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_partition_reset_slots_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_partition_purge_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

-- Create (if missing) the three roles and give each exactly what it needs; idempotent, so run
-- it again after every migrate (new functions start with no grants). Not part of the default
-- install: creating roles takes CREATEROLE, and handing the schema to p_admin takes membership
-- in it (a superuser has both). `pgque install --create-roles` calls it.
--   p_producer  publish (plain, batched, deduplicated) and the partition slot count
--   p_worker    claim, ack, nack, extend, dead_letter, stats and the wake-up channel; it cannot
--               publish: grant both roles to a login that consumes and republishes
--   p_admin     owns the schema and everything in it: install, migrate, dead letters,
--               redrive, unblock, purge, the operator view
-- Neither producer nor worker may read or change a table (only schema_version, to check the
-- installed version) or drop anything; they reach the data only through the entry points.
-- Role names are identifiers quoted with format('%I'), never spliced in as text.
CREATE FUNCTION pgque_fifo.pgque_setup_roles_v1(
    p_producer text DEFAULT 'pgque_producer', p_worker text DEFAULT 'pgque_worker',
    p_admin text DEFAULT 'pgque_admin')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_role text;
    v_rel regclass;
    v_fn regprocedure;
    v_producer_fns text[] := ARRAY['pgque_publish_v1', 'pgque_publish_many_v1',
                                   'pgque_publish_dedup_v1', 'pgque_partition_slots_v1'];
    v_worker_fns text[] := ARRAY['pgque_claim_v1', 'pgque_ack_v1', 'pgque_ack_many_v1',
                                 'pgque_nack_v1', 'pgque_extend_v1', 'pgque_dead_letter_v1',
                                 'pgque_stats_v1', 'pgque_channel_v1',
                                 'pgque_partition_slots_v1'];
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

-- Only the schema's owner (and superusers) may call anything until roles are granted.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgque_fifo FROM PUBLIC;
REVOKE ALL ON SCHEMA pgque_fifo FROM PUBLIC;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (5, 'least privilege');

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (6, 'lock order and drained groups');
INSERT INTO pgque_fifo.schema_version (version, name) VALUES (7, 'claim cursor and caller-safe reaps');
