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

-- One row per group that has messages (or is paused): the lease and the round-robin key.
--   token    the fencing token of the live lease; NULL while nobody holds the group
--   until    lease expiry while leased, park end after nack(delay), time of last service after
--            ack; NULL for a group never served. Claimable: NOT blocked AND COALESCE(until,0)<=now
--   priority fixed by the publish that created the row (0-4)
--   blocked  set when a head exhausts max_attempts under on_exhausted = 'block'
--   drained  the group drained while a publish into it was in flight (pgque_release_v1): not
--            a group until a message of its own arrives; a claim then adopts it or deletes it.
--            On a paused row: the priority is not settled, the first message's counts
--            (pgque_pause_v1)
--   paused   an operator hold (pgque_pause_v1): no claim leases the group, which is kept while
--            empty, until pgque_resume_v1
--   holder   the free-text label of the claim holding the lease (GroupInfo.lease_holder)
--   leased_id the message the live lease holds: a lease is fenced by (token, leased_id)
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
    paused   boolean NOT NULL DEFAULT false,
    holder   text,
    leased_id bigint,
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
-- whose literal predicate matches exactly one of them. Blocked and paused groups are left out
-- of all.
CREATE INDEX groups_ready_p0 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused;
CREATE INDEX groups_ready_p1 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused AND priority >= 1;
CREATE INDEX groups_ready_p2 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused AND priority >= 2;
CREATE INDEX groups_ready_p3 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused AND priority >= 3;
CREATE INDEX groups_ready_p4 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused AND priority >= 4;

-- groups(state='paused' / 'blocked') pages in group-id order: rows in these states are few,
-- so these indexes are small and a claim's or an ack's row update rarely touches them.
CREATE INDEX groups_paused ON pgque_fifo.groups (queue, group_id) WHERE paused;
CREATE INDEX groups_blocked ON pgque_fifo.groups (queue, group_id) WHERE blocked AND NOT paused;

-- The FIFO of every group. COALESCE(seq, id) orders a group (a claim leases the lowest) and
-- id is the lease's message id; an in-place redrive puts a dead letter back with its original id. Only attempts
-- and last_error are ever updated and they are not indexed, so those updates are HOT when the
-- page has room: hence fillfactor 90. priority is the one its publish asked for: it becomes
-- the group's when the message is the first of a drained group (see groups.drained).
-- last_error is the latest failure recorded by a nack (ErrorInfo JSON), or NULL.
CREATE TABLE pgque_fifo.messages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text COLLATE "C" NOT NULL,
    group_id    text COLLATE "C" NOT NULL,
    event       text NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    enqueued_at double precision NOT NULL,
    priority    smallint NOT NULL DEFAULT 0,
    last_error  text,
    seq         bigint
) WITH (fillfactor = 90);

-- A group's FIFO order is COALESCE(seq, id). seq is NULL but for a scheduled message that
-- joined its group when due (pgque_join_due_v1): it keeps its (older) id and takes its
-- position from the id sequence then, behind every message already in the group.
CREATE INDEX messages_head ON pgque_fifo.messages (queue, group_id, (COALESCE(seq, id)));

-- Messages in enqueue-time order within a queue: the walk of pgque_oldest_groups_v1.
CREATE INDEX messages_enqueued ON pgque_fifo.messages (queue, enqueued_at, id);

-- error: the failure given to dead_letter, else the message's last_error (ErrorInfo JSON).
-- seq: the message's position in its group (messages.seq), which an in-place redrive restores.
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
    failed_at   double precision NOT NULL,
    error       text,
    seq         bigint
);

CREATE INDEX dead_letters_queue ON pgque_fifo.dead_letters (queue, id);

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

-- @functions-v1 ---------------------------------------------------------------------------

-- pgque_lock_group_v1 that tells whether it created the group row (an in-place redrive then
-- knows the group did not exist, see pgque_redrive_v2). The lock protocol is the one of
-- pgque_lock_group_v1, which now calls this.
CREATE FUNCTION pgque_fifo.pgque_lock_group_v2(p_queue text, p_group_id text, p_priority integer)
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
        INSERT INTO pgque_fifo.groups (queue, group_id, priority)
        VALUES (p_queue, p_group_id, p_priority)
        ON CONFLICT (queue, group_id) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        -- Another publish created the row meanwhile (or a drain deleted it): look again.
    END LOOP;
END
$$;

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
-- (The body is pgque_lock_group_v2's, which also tells whether it created the row.)
CREATE FUNCTION pgque_fifo.pgque_lock_group_v1(p_queue text, p_group_id text, p_priority integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgque_fifo.pgque_lock_group_v2(p_queue, p_group_id, p_priority);
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

-- Free a group whose head was just settled (ack, dead_letter, operator drop) or that was found
-- empty by a claim: drop the row if the group has drained, else clear the lease and set until
-- to now (the round-robin key: served now, so it queues behind groups served earlier).
-- A paused group is kept while empty (until resume): its row stays, marked drained, which on
-- a paused row means "the first message to arrive sets the priority" (see pgque_pause_v1).
-- A drained group whose row a publish in flight holds (FOR KEY SHARE) cannot be dropped without
-- waiting for that publish, and claims and acks never wait on a publisher. The row is marked
-- drained instead: the group is gone (stats do not count it) and the publish, if it commits,
-- makes a new one, as the model has it: never served (until NULL) and with the priority of its
-- first message (messages.priority; the row says 4 meanwhile so every claim floor reaches it).
-- The first claim to reach the row adopts that priority (pgque_lease_group_v3) or, once
-- nobody holds it and it is still empty (the publish rolled back), deletes it.
CREATE FUNCTION pgque_fifo.pgque_release_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                    WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
        -- The group's messages that fell due meanwhile join first (its locks are held): the
        -- group had a message at their due time, so it goes on with its priority, as in the
        -- model, instead of being dropped and made anew by them.
        IF pgque_fifo.pgque_join_due_v1(p_queue, p_group_id, p_now, 1000) > 0 THEN
            UPDATE pgque_fifo.groups g
               SET token = NULL, leased_id = NULL, holder = NULL, until = p_now
             WHERE g.queue = p_queue AND g.group_id = p_group_id;
            RETURN;
        END IF;
        UPDATE pgque_fifo.groups g
           SET token = NULL, leased_id = NULL, holder = NULL, until = p_now, blocked = false,
               drained = true
         WHERE g.queue = p_queue AND g.group_id = p_group_id AND g.paused;
        IF FOUND THEN
            RETURN;
        END IF;
        -- SKIP LOCKED: never wait, so no deadlock. Once we hold the row, later publishes wait
        -- for us; look again with a fresh snapshot for one that committed in between.
        PERFORM 1 FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            UPDATE pgque_fifo.groups g
               SET token = NULL, leased_id = NULL, holder = NULL, until = NULL, blocked = false,
                   priority = 4, drained = true
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
       SET token = NULL, leased_id = NULL, holder = NULL,
           until = CASE WHEN g.drained AND NOT g.paused THEN NULL ELSE p_now END
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
END
$$;

-- Move one message to the dead letters, recording its group's priority and the error: the
-- one given, else the message's last recorded one.
CREATE FUNCTION pgque_fifo.pgque_bury_v2(
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

-- Up to p_limit claimable groups in claim order after the cursor (p_after_until,
-- p_after_group), locked FOR NO KEY UPDATE, with each row's claim-order key (the next cursor);
-- rows another claim holds are skipped, so concurrent claimers take different groups. One
-- static query per priority floor: its literal predicate matches one partial index, which
-- serves the range (COALESCE(until, 0) <= now), the cursor (a row comparison on the index's
-- columns) and the order, so there is no sort. Paused groups are in no claim index: a pause
-- that committed before the row is locked is seen by the lock's recheck of the predicate.
-- A claim's later rounds start after the rows it already passed instead of rescanning them
-- (with a list of rows to skip, K drained rows with a publish in flight cost about K^3
-- comparisons). p_leased (at most the claim's n rows) keeps a group the claim leased with
-- visibility 0 from coming round again.
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
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 1 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused AND g.priority >= 1
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 2 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused AND g.priority >= 2
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 3 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused AND g.priority >= 3
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSE
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused AND g.priority >= 4
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

-- Lease the head (the lowest message id) of one group the caller has locked. A drained row
-- (see pgque_release_v1) first becomes the new group its first message made: that message's
-- priority, never served; if that priority is below p_min_priority nothing is leased. An
-- exhausted head (attempts >= max_attempts) is dead-lettered ("max_attempts (N) exhausted",
-- keeping its last error) and the next one tried, or the group is blocked. A paused group is
-- never leased (the candidates leave it out; this is the last word). The lease remembers its
-- message (leased_id) and the claim's holder label. Returns no row when nothing was leased.
CREATE FUNCTION pgque_fifo.pgque_lease_group_v3(
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

-- The previous release's claim: pgque_claim_v2 without a holder label.
CREATE FUNCTION pgque_fifo.pgque_claim_v1(
    p_queue text, p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_now double precision)
RETURNS TABLE (group_id text, message_id bigint, event text, token text, priority integer,
               attempt integer, expires_at double precision)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
        SELECT c.group_id, c.message_id, c.event, c.token, c.priority, c.attempt, c.expires_at
          FROM pgque_fifo.pgque_claim_v2(p_queue, p_n, p_visibility, p_min_priority,
                                         p_max_attempts, p_on_exhausted, NULL, p_now) AS c;
END
$$;

-- Fencing: lock the group row and tell whether (token, message id) is still the live lease,
-- even past its expiry, until another claim takes the group. The lease names its message
-- (leased_id): a lower id that a redrive put back meanwhile does not change which message a
-- lease holds.
CREATE FUNCTION pgque_fifo.pgque_held_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id AND g.token = p_token
       AND g.leased_id = p_message_id
       FOR NO KEY UPDATE;
    RETURN FOUND;
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
    RETURN pgque_fifo.pgque_nack_v2(p_queue, p_group_id, p_message_id, p_token, p_delay, NULL,
                                    p_now);
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
BEGIN
    RETURN pgque_fifo.pgque_dead_letter_v2(p_queue, p_group_id, p_message_id, p_token,
                                           p_reason, NULL, p_now);
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
-- receive is dropped again if it is empty (never a paused one: a pause keeps an empty group),
-- and a new group whose first dead letter went elsewhere takes the priority of the first one
-- it does receive.
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

-- Release a group blocked by on_exhausted = 'block': retry its head with a fresh attempt count,
-- or (p_drop_head) dead-letter the head (keeping its last error). False when the group is not
-- blocked. A paused group stays paused.
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

-- The previous release's stats: pgque_stats_v2 without the paused count.
CREATE FUNCTION pgque_fifo.pgque_stats_v1(p_queue text, p_now double precision)
RETURNS TABLE (groups bigint, messages bigint, in_flight bigint, parked bigint, blocked bigint,
               dead_letters bigint, oldest_age_s double precision,
               next_resume_at double precision)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
        SELECT s.groups, s.messages, s.in_flight, s.parked, s.blocked, s.dead_letters,
               s.oldest_age_s, s.next_resume_at
          FROM pgque_fifo.pgque_stats_v2(p_queue, p_now) AS s;
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
    DELETE FROM pgque_fifo.scheduled s
     WHERE s.id IN (SELECT k.id FROM pgque_fifo.scheduled k
                     WHERE k.queue = p_queue
                     ORDER BY k.id
                       FOR UPDATE);
    DELETE FROM pgque_fifo.ticks t WHERE t.queue = p_queue;
END
$$;

-- An ErrorInfo's JSON with "at" filled in by p_now when the caller left it null (the server's
-- clock judges, as for every other time). NULL stays NULL.
CREATE FUNCTION pgque_fifo.pgque_error_at_v1(p_error text, p_now double precision)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_error IS NULL THEN NULL
        WHEN jsonb_typeof(p_error::jsonb -> 'at') = 'number' THEN p_error
        ELSE jsonb_set(p_error::jsonb, '{at}', to_jsonb(p_now))::text
    END
$$;

-- Lease the heads of up to p_n distinct groups in claim order: smallest (COALESCE(until, 0),
-- group_id), group ids compared by code point. One round trip; each group at most once.
-- p_holder labels the leases (GroupInfo.lease_holder).
CREATE FUNCTION pgque_fifo.pgque_claim_v2(
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

-- Give the message back; with p_delay > 0 park the group until then. p_error (ErrorInfo JSON,
-- "at" filled in by the server when null) becomes the message's last_error; NULL keeps it.
CREATE FUNCTION pgque_fifo.pgque_nack_v2(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_delay double precision,
    p_error text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    IF p_error IS NOT NULL THEN
        UPDATE pgque_fifo.messages m SET last_error = pgque_fifo.pgque_error_at_v1(p_error, v_now)
         WHERE m.id = p_message_id;
    END IF;
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

-- Give the message back for immediate redelivery without counting this delivery: its attempts
-- go back down by one, the lease ends and the group is claimable at once (like a nack without
-- delay: until = now, behind the groups served earlier). last_error is kept.
CREATE FUNCTION pgque_fifo.pgque_release_lease_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    UPDATE pgque_fifo.messages m SET attempts = greatest(m.attempts - 1, 0)
     WHERE m.id = p_message_id;
    UPDATE pgque_fifo.groups g
       SET token = NULL, leased_id = NULL, holder = NULL, until = v_now
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
END
$$;

-- Move the leased message to the dead letters with p_reason and p_error (else its
-- last_error); the group continues.
CREATE FUNCTION pgque_fifo.pgque_dead_letter_v2(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_reason text,
    p_error text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    PERFORM pgque_fifo.pgque_bury_v2(p_queue, p_group_id, p_message_id, p_reason,
                                     pgque_fifo.pgque_error_at_v1(p_error, v_now), v_now);
    PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    RETURN true;
END
$$;

-- Settle finished leases and lease up to p_n new heads in one call (the fused worker loop: one
-- round trip per message in steady state). Item i of the arrays is one settlement: p_outcomes
-- 'ack', 'nack' (p_delays, p_errors), 'release' or 'dead_letter' (p_reasons, p_errors) of the
-- lease (p_group_ids, p_message_ids, p_tokens). Each acts exactly as its own entry point
-- (pgque_ack_v1, pgque_nack_v2, pgque_release_lease_v1, pgque_dead_letter_v2) would, fenced on
-- its own, in list order; then up to p_n heads are leased exactly as pgque_claim_v2 leases them
-- (p_n = 0: settle only). Everything is judged at one now.
-- Lock order (docs/postgres.md): first every settled group's row, in group-id byte order (input
-- order within a group), as pgque_ack_many_v1 takes them: pgque_held_v1 locks the row of a
-- lease still held (FOR NO KEY UPDATE) and leaves the others alone, as the settle would. Only
-- then are the settlements applied, in list order (so dead letters get their ids in list
-- order), each checking its fence again on the row this call now holds; a duplicate lease in
-- the list finds its token gone. Then the claim, whose candidate rows are taken with SKIP
-- LOCKED (a group this call just freed may be leased again by it, as the reference model
-- does). One result: a first row with the settlement results (settled, one per item, in order)
-- and NULL lease columns, then one row per lease with settled NULL.
CREATE FUNCTION pgque_fifo.pgque_settle_claim_v1(
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

-- Dead letters with id > p_after (all when NULL), oldest first, with their recorded error.
CREATE FUNCTION pgque_fifo.pgque_dead_letters_v2(p_queue text, p_limit integer, p_after bigint)
RETURNS TABLE (id bigint, group_id text, message_id bigint, event text, priority integer,
               attempts integer, reason text, failed_at double precision, error text)
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.group_id, d.message_id, d.event, d.priority, d.attempts, d.reason,
           d.failed_at, d.error
      FROM pgque_fifo.dead_letters d
     WHERE d.queue = p_queue AND d.id > COALESCE(p_after, 0)
     ORDER BY d.id
     LIMIT p_limit
$$;

-- Delete the dead letters with these ids (locked in id order); returns how many existed.
CREATE FUNCTION pgque_fifo.pgque_delete_dead_letters_v1(p_queue text, p_ids bigint[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_count integer;
BEGIN
    DELETE FROM pgque_fifo.dead_letters d
     WHERE d.id IN (SELECT k.id FROM pgque_fifo.dead_letters k
                     WHERE k.queue = p_queue AND k.id = ANY (p_ids)
                     ORDER BY k.id
                       FOR UPDATE);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- Return dead letters (all of the queue when p_ids is NULL) to their groups; returns how many.
-- Not in place: pgque_redrive_v1 (new messages at the tails). In place: each message goes back
-- with its original id and position (a claim always delivers a group's lowest position, so it
-- comes before every later message not yet delivered; a lease out keeps its own message, see
-- pgque_held_v1), with
-- attempts 0 and no last error, enqueued at the redrive's time (as the reference model has
-- it: head_enqueued_at and oldest_age_s count from the redrive). A group that does not exist is
-- created with the priority of its first dead letter (dead-letter id order); an existing one
-- keeps its priority, pause and block. Locks, in the documented order:
--   1. per group in group-id byte order: the queue's lock (shared), the group's advisory lock
--      and its row FOR KEY SHARE (pgque_lock_group_v1, creating a missing row), as a publish
--      does: publishes into the group wait for the redrive, or the redrive for them;
--   2. then the same rows FOR NO KEY UPDATE, in byte order, once every advisory lock is held
--      (a caller's transaction that published into one of the groups and then settled a
--      lease of another could otherwise wait on a row the redrive holds while the redrive
--      waits on its publish);
--   3. then the dead letters in id order (one another redrive or a purge took meanwhile is
--      skipped);
--   4. the rows are held, so nobody changes a group's messages while the redrive looks at them:
--      a drained row is settled (see pgque_pause_v1) before any message goes in, then the
--      messages are inserted and the dead letters deleted; a group created for nothing (its
--      dead letters went elsewhere) is dropped again.
CREATE FUNCTION pgque_fifo.pgque_redrive_v2(
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

-- Hold a group: no claim leases it until pgque_resume_v1 (a lease already out finishes
-- normally). True if it was not paused. A group that does not exist is created paused,
-- empty, with priority 0 and never served. Locks one group row, FOR NO KEY UPDATE: it waits
-- for a claim or a settle holding the row (that claim's lease was granted before the pause),
-- and a claim after the pause commits skips the row (it is in no claim index, and a claim that
-- read the row before sees the pause when it locks it). Publishes are not waited for: they
-- hold the row FOR KEY SHARE.
-- On a paused row, drained means "the priority is not settled": an empty paused group takes
-- the priority of the first message that arrives ("a publish into a group with no messages
-- sets its priority"), and the first message's priority is what group() shows and what
-- resume keeps. A drained row that is not paused is no group yet, or one whose first
-- publish committed after the drain: pausing settles it (the priority of its first message),
-- or creates the group afresh when it has no message (a publish in flight then sets the
-- priority when it commits).
CREATE FUNCTION pgque_fifo.pgque_pause_v1(p_queue text, p_group_id text)
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

-- Lift a pause; false if the group is not paused (or does not exist). A resumed group with
-- messages settles its priority (see pgque_pause_v1) and is claimable again; one without is
-- removed, as a drain removes it (marked drained when a publish in flight holds the row).
CREATE FUNCTION pgque_fifo.pgque_resume_v1(p_queue text, p_group_id text)
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

-- Lift the hold of pgque_pause_v1 at p_now, due scheduled messages let in first (migration 0013).
CREATE FUNCTION pgque_fifo.pgque_resume_v2(p_queue text, p_group_id text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_paused boolean;
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    -- Due scheduled messages join first (as group() lets them in): a group whose only
    -- message is one that fell due while it was paused is not empty, and keeps its place.
    PERFORM pgque_fifo.pgque_promote_group_v1(p_queue, p_group_id, v_now);
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

-- (migration 0014)
-- End the retry delay a group waits out (pgque_nack's delay): its head is claimable at p_now,
-- its attempt count and last error kept; a paused group stays paused (the delay is over when
-- it resumes). False if the group waits for no retry: absent, drained, blocked, leased, or
-- claimable already. Locks one group row, FOR NO KEY UPDATE (waits for a claim or settle
-- holding it: a lease granted before this call finishes normally).
CREATE FUNCTION pgque_fifo.pgque_retry_now_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_row record;
BEGIN
    SELECT g.token, g.until, g.blocked, g.drained, g.paused INTO v_row FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR v_row.drained OR v_row.blocked OR v_row.token IS NOT NULL
       OR v_row.until IS NULL OR v_row.until <= v_now THEN
        RETURN false;
    END IF;
    UPDATE pgque_fifo.groups g SET until = v_now
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    IF NOT v_row.paused THEN
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN true;
END
$$;

-- pgque_unblock_v1 with p_head: when given, the group is released only if p_head is still
-- its head (the message the operator looked at); false otherwise, nothing changed. Locks one
-- group row, FOR NO KEY UPDATE, then (dropping the head) what pgque_bury_v2 locks.
CREATE FUNCTION pgque_fifo.pgque_unblock_v2(
    p_queue text, p_group_id text, p_drop_head boolean, p_head bigint, p_now double precision)
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

-- pgque_redrive_v2, then, in place: each redriven message takes its dead letter's error as
-- its last error (the group keeps its history), and with p_retry_now the retry delay its
-- group waits out ends (as pgque_retry_now_v1). Locks what pgque_redrive_v2 locks (group rows
-- in group id order, then dead letters in id order); the rows updated after it are the ones
-- it locked or inserted.
CREATE FUNCTION pgque_fifo.pgque_redrive_v3(
    p_queue text, p_ids bigint[], p_in_place boolean, p_retry_now boolean,
    p_now double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_messages bigint[];
    v_errors text[];
    v_groups text[];
    v_count integer;
BEGIN
    IF NOT p_in_place THEN
        RETURN pgque_fifo.pgque_redrive_v1(p_queue, p_ids, p_now);
    END IF;
    SELECT array_agg(d.message_id ORDER BY d.id), array_agg(d.error ORDER BY d.id),
           array_agg(DISTINCT d.group_id)
      INTO v_messages, v_errors, v_groups
      FROM pgque_fifo.dead_letters d
     WHERE d.queue = p_queue AND (p_ids IS NULL OR d.id = ANY (p_ids));
    v_count := pgque_fifo.pgque_redrive_v2(p_queue, p_ids, true, v_now);
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

-- One group as an operator sees it at p_now, or no row when the queue has no such group (a
-- drained row without a message is none; a paused one always is). State by precedence:
-- paused, blocked, leased (a token out and unexpired), parked (no token, until in the
-- future), ready. depth counts the group's messages (its index entries: the cost grows with
-- the depth); the head is the lowest id.
CREATE FUNCTION pgque_fifo.pgque_group_info_v1(
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

CREATE FUNCTION pgque_fifo.pgque_group_v1(p_queue text, p_group_id text, p_now double precision)
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

-- The group ids of one groups() page: up to p_limit groups after p_after in byte order, in
-- p_state when given. Every page is a range of an index, never a scan of the queue: the
-- primary key in group-id order (every group; ready groups), groups_paused, groups_blocked; a
-- page of leased or parked groups reads the claim index's future range (COALESCE(until, 0) >
-- now: the leases out and the parks, usually few) and sorts it. The planner has no statistics
-- on COALESCE(until, 0) (those of a partial index are not used) and would guess that a third
-- of the groups lie in the future range, making the range look dearer than a scan; spelt as
-- a bounded range (> now AND < 'Infinity') it gets the default estimate of a range instead
-- (half a percent), so the index range is chosen. The function is planned afresh for each call
-- (plan_cache_mode, set on the function), with the call's own now. A ready page walks the
-- primary key and skips the groups in other states (cheap while most groups are ready, which
-- is a queue's usual state; a queue whose groups are nearly all parked pays for the skipped
-- ones). A drained row is tested for a message with a scalar subquery, probed only for drained
-- rows (an EXISTS here was planned as a hash of every message of the table).
CREATE FUNCTION pgque_fifo.pgque_group_page_v1(
    p_queue text, p_state text, p_limit integer, p_after text, p_now double precision)
RETURNS text[] LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_state IS NULL THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.group_id > p_after COLLATE "C"
               AND (NOT g.drained OR g.paused
                    OR (SELECT true FROM pgque_fifo.messages m
                         WHERE m.queue = g.queue AND m.group_id = g.group_id LIMIT 1))
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'paused' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.paused AND g.group_id > p_after COLLATE "C"
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'blocked' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.blocked AND NOT g.paused
               AND g.group_id > p_after COLLATE "C"
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'leased' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) > p_now AND COALESCE(g.until, 0) < 'Infinity'
               AND g.token IS NOT NULL
               AND g.group_id > p_after COLLATE "C"
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'parked' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) > p_now AND COALESCE(g.until, 0) < 'Infinity'
               AND g.token IS NULL
               AND g.group_id > p_after COLLATE "C"
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'ready' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) <= p_now
               AND g.group_id > p_after COLLATE "C"
               AND (NOT g.drained
                    OR (SELECT true FROM pgque_fifo.messages m
                         WHERE m.queue = g.queue AND m.group_id = g.group_id LIMIT 1))
             ORDER BY g.group_id
             LIMIT p_limit);
    END IF;
    RAISE EXCEPTION 'pgque: unknown group state %', p_state;
END
$$;

-- Up to p_limit groups after p_after (all when NULL) in byte order of group id, only those in
-- p_state when given (ready, leased, parked, blocked, paused); as pgque_group_v1 shows them.
-- The page's ids are taken first into a variable: as an argument of unnest() in the query the
-- page function would also run while the query is planned (to estimate its rows).
CREATE FUNCTION pgque_fifo.pgque_groups_v1(
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

-- The groups of p_queue that hold a message, the oldest head first: ordered by the head's
-- enqueue time, then by group id in byte order, at most p_limit of them, only those in
-- p_state if it is not NULL (the state names of pgque_group_info_v1). Due scheduled messages
-- join first, as in pgque_groups_v1.
--
-- A state an operator or a lease holds (paused, blocked, leased, parked) is read from the
-- groups in it (an index range each: groups_paused, groups_blocked, or groups_ready_p0 past
-- now), each with its head (one probe of messages_head), then sorted. Otherwise
-- messages_enqueued is walked from the oldest message, skipping the groups already seen: the
-- first message of a group not seen yet leads to that group's head (one probe), and the walk
-- stops once p_limit heads older than the next unseen message are known (every group not seen
-- has its head at or after it). It reads the messages older than the last head it returns:
-- few, unless a group holds a long backlog older than the others' heads (docs/postgres.md).
CREATE FUNCTION pgque_fifo.pgque_oldest_groups_v1(
    p_queue text, p_state text, p_limit integer, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_at double precision := '-infinity';
    v_id bigint := 0;
    v_next_at double precision;
    v_next_id bigint;
    v_gid text;
    v_head double precision;
    v_seen text[] := '{}';
    v_gids text[] := '{}';
    v_heads double precision[] := '{}';
    v_ready boolean;
BEGIN
    IF current_setting('transaction_read_only') <> 'on' THEN
        LOOP
            EXIT WHEN pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now) = 0;
        END LOOP;
    END IF;
    -- A held state: its groups from their index, each with its head (one probe), below.
    -- (The future range of leased and parked groups is bounded, as in pgque_group_page_v1:
    -- the planner has no statistics for the expression of a partial index.)
    IF p_state = 'paused' THEN
        v_gids := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND g.paused);
    ELSIF p_state = 'blocked' THEN
        v_gids := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND g.blocked AND NOT g.paused);
    ELSIF p_state = 'leased' THEN
        v_gids := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
                           AND COALESCE(g.until, 0) > v_now
                           AND COALESCE(g.until, 0) < 'Infinity'
                           AND g.token IS NOT NULL);
    ELSIF p_state = 'parked' THEN
        v_gids := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
                           AND COALESCE(g.until, 0) > v_now
                           AND COALESCE(g.until, 0) < 'Infinity'
                           AND g.token IS NULL);
    ELSE
        LOOP
            SELECT m.enqueued_at, m.id, m.group_id INTO v_next_at, v_next_id, v_gid
              FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND (m.enqueued_at, m.id) > (v_at, v_id)
               AND m.group_id <> ALL (v_seen)
             ORDER BY m.enqueued_at, m.id
             LIMIT 1;
            EXIT WHEN NOT FOUND;
            EXIT WHEN (SELECT count(*) FROM unnest(v_heads) AS k(at) WHERE k.at < v_next_at)
                      >= p_limit;
            v_at := v_next_at;
            v_id := v_next_id;
            v_seen := v_seen || v_gid;
            IF p_state = 'ready' THEN
                SELECT NOT g.paused AND NOT g.blocked AND COALESCE(g.until, 0) <= v_now
                  INTO v_ready
                  FROM pgque_fifo.groups g
                 WHERE g.queue = p_queue AND g.group_id = v_gid;
                CONTINUE WHEN v_ready IS NOT TRUE;
            END IF;
            SELECT m.enqueued_at INTO v_head FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND m.group_id = v_gid
             ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
            v_gids := v_gids || v_gid;
            v_heads := v_heads || v_head;
        END LOOP;
    END IF;
    IF p_state IN ('paused', 'blocked', 'leased', 'parked') THEN
        -- A group without a message (a paused empty one) has no head: it drops out here.
        SELECT COALESCE(array_agg(c.gid), '{}'), COALESCE(array_agg(h.enqueued_at), '{}')
          INTO v_gids, v_heads
          FROM unnest(v_gids) AS c(gid)
         CROSS JOIN LATERAL (SELECT m.enqueued_at FROM pgque_fifo.messages m
                              WHERE m.queue = p_queue AND m.group_id = c.gid
                              ORDER BY COALESCE(m.seq, m.id) LIMIT 1) AS h;
    END IF;
    RETURN QUERY
        SELECT i.group_id, i.state, i.depth, i.priority, i.head_message_id, i.head_enqueued_at,
               i.head_attempts, i.lease_expires_at, i.lease_holder, i.resume_at, i.last_error
          FROM (SELECT c.gid, c.at FROM unnest(v_gids, v_heads) AS c(gid, at)
                 ORDER BY c.at, c.gid COLLATE "C" LIMIT p_limit) AS c
         CROSS JOIN LATERAL pgque_fifo.pgque_group_info_v1(p_queue, c.gid, v_now) AS i
         ORDER BY c.at, c.gid COLLATE "C";
END
$$;

-- Counts of one queue at p_now. Each group is counted in at most one of paused, blocked,
-- in_flight and parked, by precedence (as group() names its state); groups counts every group,
-- a paused empty one included, but not a drained row without a message (pgque_release_v1).
CREATE FUNCTION pgque_fifo.pgque_stats_v2(p_queue text, p_now double precision)
RETURNS TABLE (groups bigint, messages bigint, in_flight bigint, parked bigint, blocked bigint,
               dead_letters bigint, oldest_age_s double precision,
               next_resume_at double precision, paused bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
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
    RETURN NEXT;
END
$$;

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

-- @end-functions-v1 -----------------------------------------------------------------------

-- One row per queue, by the server's clock: what `pgque stats` shows, for dashboards and
-- alerts (SELECT * FROM pgque_fifo.queue_stats).
CREATE VIEW pgque_fifo.queue_stats AS
SELECT q.queue, s.groups, s.messages, s.in_flight, s.parked, s.blocked, s.dead_letters,
       s.oldest_age_s, to_timestamp(s.next_resume_at) AS next_resume_at, s.paused,
       s.scheduled, to_timestamp(s.next_due_at) AS next_due_at
  FROM (SELECT g.queue FROM pgque_fifo.groups g
        UNION
        SELECT d.queue FROM pgque_fifo.dead_letters d
        UNION
        SELECT k.queue FROM pgque_fifo.scheduled k) AS q
 CROSS JOIN LATERAL pgque_fifo.pgque_stats_v3(q.queue, NULL) AS s;

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
    -- Scheduled messages were routed under the old count too: they would join after a reset.
    IF EXISTS (SELECT 1 FROM pgque_fifo.messages m WHERE m.queue = p_queue)
       OR EXISTS (SELECT 1 FROM pgque_fifo.scheduled s WHERE s.queue = p_queue) THEN
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
ALTER FUNCTION pgque_fifo.pgque_share_group_v1(text, text) SET lock_timeout = '20ms';
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
-- Migration 0008: the entry points of issue 14, and one helper planned afresh for every call.
ALTER FUNCTION pgque_fifo.pgque_group_page_v1(text, text, integer, text, double precision)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION pgque_fifo.pgque_claim_v2(
    text, integer, double precision, integer, integer, text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_nack_v2(
    text, text, bigint, text, double precision, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_release_lease_v1(text, text, bigint, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_dead_letter_v2(
    text, text, bigint, text, text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_dead_letters_v2(text, integer, bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_delete_dead_letters_v1(text, bigint[])
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
ALTER FUNCTION pgque_fifo.pgque_stats_v2(text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
-- Migration 0009: the fused settle-and-claim.
ALTER FUNCTION pgque_fifo.pgque_settle_claim_v1(
    text, text[], text[], bigint[], text[], double precision[], text[], text[], integer,
    double precision, integer, integer, text, text[], double precision)
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

-- Create (if missing) the three roles and give each exactly what it needs; idempotent, so run
-- it again after every migrate (new functions start with no grants). Not part of the default
-- install: creating roles takes CREATEROLE, and handing the schema to p_admin takes membership
-- in it (a superuser has both). `pgque install --create-roles` calls it.
--   p_producer  publish (plain, batched, deduplicated, delayed), cancel and list scheduled
--               messages, publish periodic ticks, and the partition slot count
--   p_worker    claim, ack, nack, release, extend, dead_letter, the fused settle-and-claim,
--               stats, the next due time and the wake-up channel;
--               it cannot publish: grant both roles to a login that consumes and republishes
--   p_admin     owns the schema and everything in it: install, migrate, dead letters,
--               redrive, unblock, pause, resume, group inspection, purge, the operator view
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

-- Only the schema's owner (and superusers) may call anything until roles are granted.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgque_fifo FROM PUBLIC;
REVOKE ALL ON SCHEMA pgque_fifo FROM PUBLIC;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (5, 'least privilege');

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (6, 'lock order and drained groups');
INSERT INTO pgque_fifo.schema_version (version, name) VALUES (7, 'claim cursor and caller-safe reaps');
INSERT INTO pgque_fifo.schema_version (version, name) VALUES (8, 'groups as first-class objects');
INSERT INTO pgque_fifo.schema_version (version, name) VALUES (9, 'settle and claim');
INSERT INTO pgque_fifo.schema_version (version, name) VALUES (10, 'scheduled messages');
-- Migration 0011: the groups with the oldest heads.
REVOKE ALL ON FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
-- Planned at each call with its own now (the future range of leased and parked groups).
ALTER FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    SET plan_cache_mode = force_custom_plan;
INSERT INTO pgque_fifo.schema_version (version, name) VALUES (11, 'oldest groups');
-- Migration 0012: index plans everywhere, whatever the statistics say (see the migration).
ALTER FUNCTION pgque_fifo.pgque_promote_v1(text, integer, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_promote_one_v1(text, text, double precision, integer)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_promote_group_v1(text, text, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_join_due_v1(text, text, double precision, integer)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_lock_join_v1(text, text, integer, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_next_due_v1(text, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_scheduled_v1(text, integer, bigint, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_cancel_v1(text, bigint, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    SET enable_seqscan = off;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (12, 'index plans everywhere');
-- Migration 0013: resume lets due messages in.
REVOKE ALL ON FUNCTION pgque_fifo.pgque_resume_v2(text, text, double precision) FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_resume_v2(text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
INSERT INTO pgque_fifo.schema_version (version, name) VALUES (13, 'resume lets due messages in');

REVOKE ALL ON FUNCTION pgque_fifo.pgque_retry_now_v1(text, text, double precision) FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_retry_now_v1(text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_unblock_v2(text, text, boolean, bigint, double precision)
    FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_unblock_v2(text, text, boolean, bigint, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_redrive_v3(text, bigint[], boolean, boolean, double precision)
    FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_redrive_v3(text, bigint[], boolean, boolean, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (14, 'operator retries');

-- A claim's candidate scan walks a ready index in claim order from its cursor. With the
-- statistics of a table that other queues fill, a small queue's scan could be planned as a
-- read of all its rows and a sort, every round: K drained rows whose publish is in flight then
-- cost K^2 row reads per claim (1,000 rows: 1,006,004 reads). Sorting off, the plan left is
-- the index walk.
ALTER FUNCTION pgque_fifo.pgque_candidates_v2(
    text, integer, integer, double precision, double precision, text, text[])
    SET enable_sort = off;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (15, 'claim scan plans');
