-- Migration 0008: groups as first-class objects (issue 14): an operator can see, pause and
-- resume every group; failures keep their cause; redrive puts a dead letter back in place.
--
-- * groups.paused (an operator hold: claims skip the group; it is kept while empty),
--   groups.holder (the claim's free-text label), groups.leased_id (the leased message: a lease
--   is fenced by (token, leased_id), no longer by "the head is the leased message", so a
--   redrive that puts a lower id back while a lease is out does not disturb it).
-- * messages.last_error and dead_letters.error: the latest recorded failure (ErrorInfo JSON).
-- * The claim indexes leave paused groups out; two small partial indexes list the paused and
--   the blocked groups in group-id order, for groups(state=...).
-- * New entry points: pgque_claim_v2 (holder), pgque_nack_v2 and pgque_dead_letter_v2 (error),
--   pgque_release_lease_v1, pgque_dead_letters_v2 (after, error), pgque_delete_dead_letters_v1,
--   pgque_redrive_v2 (in place), pgque_pause_v1, pgque_resume_v1, pgque_group_v1,
--   pgque_groups_v1, pgque_stats_v2 (paused). The v1 entry points stay for the previous
--   release's workers and call the new code.
-- * An exhausted head's dead letter says "max_attempts (N) exhausted".

ALTER TABLE pgque_fifo.groups ADD COLUMN paused boolean NOT NULL DEFAULT false;
ALTER TABLE pgque_fifo.groups ADD COLUMN holder text;
ALTER TABLE pgque_fifo.groups ADD COLUMN leased_id bigint;
ALTER TABLE pgque_fifo.messages ADD COLUMN last_error text;
ALTER TABLE pgque_fifo.dead_letters ADD COLUMN error text;

-- A lease out now names its message: until this migration the leased message was the head.
UPDATE pgque_fifo.groups g
   SET leased_id = (SELECT m.id FROM pgque_fifo.messages m
                     WHERE m.queue = g.queue AND m.group_id = g.group_id
                     ORDER BY m.id LIMIT 1)
 WHERE g.token IS NOT NULL;

DROP INDEX pgque_fifo.groups_ready_p0;
DROP INDEX pgque_fifo.groups_ready_p1;
DROP INDEX pgque_fifo.groups_ready_p2;
DROP INDEX pgque_fifo.groups_ready_p3;
DROP INDEX pgque_fifo.groups_ready_p4;
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
CREATE INDEX groups_paused ON pgque_fifo.groups (queue, group_id) WHERE paused;
CREATE INDEX groups_blocked ON pgque_fifo.groups (queue, group_id) WHERE blocked AND NOT paused;

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
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_lock_group_v1(p_queue text, p_group_id text, p_priority integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pgque_fifo.pgque_lock_group_v2(p_queue, p_group_id, p_priority);
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
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_release_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                    WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
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
        RETURNING m.queue, m.group_id, m.id, m.event, m.attempts, m.enqueued_at, m.last_error
    )
    INSERT INTO pgque_fifo.dead_letters
        (queue, group_id, message_id, event, priority, attempts, reason, enqueued_at, failed_at,
         error)
    SELECT gone.queue, gone.group_id, gone.id, gone.event, g.priority, gone.attempts, p_reason,
           gone.enqueued_at, p_now, COALESCE(p_error, gone.last_error)
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
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_candidates_v2(
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
               ORDER BY m.id
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

-- The previous release's claim: pgque_claim_v2 without a holder label.
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_claim_v1(
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
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_held_v1(
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_nack_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_delay double precision,
    p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RETURN pgque_fifo.pgque_nack_v2(p_queue, p_group_id, p_message_id, p_token, p_delay, NULL,
                                    p_now);
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_dead_letter_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_reason text,
    p_now double precision)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RETURN pgque_fifo.pgque_dead_letter_v2(p_queue, p_group_id, p_message_id, p_token,
                                           p_reason, NULL, p_now);
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

-- Publish dead letters (all of the queue when p_ids is NULL) again at their groups' tails, in
-- dead-letter id order, with the priority they were recorded with; unknown ids are ignored.
-- Locks in the documented order: each group's advisory lock and row in group-id byte order
-- (as publish_many does), then the dead-letter rows in id order. A dead letter that another
-- redrive or a purge took meanwhile is gone by then and skipped: a group left with nothing to
-- receive is dropped again if it is empty (never a paused one: a pause keeps an empty group),
-- and a new group whose first dead letter went elsewhere takes the priority of the first one
-- it does receive.
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
           AND NOT g.paused
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

-- Return dead letters (all of the queue when p_ids is NULL) to their groups; returns how many.
-- Not in place: pgque_redrive_v1 (new messages at the tails). In place: each message goes back
-- with its original id (a claim always delivers a group's lowest id, so it comes before every
-- later message not yet delivered; a lease out keeps its own message, see pgque_held_v1), with
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
BEGIN
    IF NOT p_in_place THEN
        RETURN pgque_fifo.pgque_redrive_v1(p_queue, p_ids, p_now);
    END IF;
    FOR v_row IN
        SELECT DISTINCT ON (d.group_id) d.group_id, d.priority FROM pgque_fifo.dead_letters d
         WHERE d.queue = p_queue AND (p_ids IS NULL OR d.id = ANY (p_ids))
         ORDER BY d.group_id, d.id
    LOOP
        IF pgque_fifo.pgque_lock_group_v2(p_queue, v_row.group_id, v_row.priority) THEN
            v_created := v_created || v_row.group_id;
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
             ORDER BY m.id LIMIT 1;
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
        SELECT DISTINCT ON (d.message_id) d.id, d.message_id, d.group_id, d.event, d.priority
          FROM pgque_fifo.dead_letters d
         WHERE d.id = ANY (v_ids)
         ORDER BY d.message_id, d.id
    ),
    -- The original id; a message that somehow still exists keeps its dead letter.
    inserted AS (
        INSERT INTO pgque_fifo.messages
            (id, queue, group_id, event, attempts, enqueued_at, priority, last_error)
        OVERRIDING SYSTEM VALUE
        SELECT s.message_id, p_queue, s.group_id, s.event, 0, v_now, s.priority, NULL
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

-- Release a group blocked by on_exhausted = 'block': retry its head with a fresh attempt count,
-- or (p_drop_head) dead-letter the head (keeping its last error). False when the group is not
-- blocked. A paused group stays paused.
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
     ORDER BY m.id LIMIT 1;
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
             ORDER BY m.id LIMIT 1;
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
                                  ORDER BY m.id LIMIT 1)
                           ELSE g.priority END
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
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
           ORDER BY m.id
           LIMIT 1) AS h ON true
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       AND (NOT g.drained OR g.paused OR h.id IS NOT NULL)
$$;

CREATE FUNCTION pgque_fifo.pgque_group_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE sql STABLE AS $$
    SELECT * FROM pgque_fifo.pgque_group_info_v1(
        p_queue, p_group_id,
        COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision))
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
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_ids text[];
BEGIN
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

-- The previous release's stats: pgque_stats_v2 without the paused count.
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_stats_v1(p_queue text, p_now double precision)
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

-- One row per queue, by the server's clock: what `pgque stats` shows, for dashboards and
-- alerts (SELECT * FROM pgque_fifo.queue_stats).
CREATE OR REPLACE VIEW pgque_fifo.queue_stats AS
SELECT q.queue, s.groups, s.messages, s.in_flight, s.parked, s.blocked, s.dead_letters,
       s.oldest_age_s, to_timestamp(s.next_resume_at) AS next_resume_at, s.paused
  FROM (SELECT g.queue FROM pgque_fifo.groups g
        UNION
        SELECT d.queue FROM pgque_fifo.dead_letters d) AS q
 CROSS JOIN LATERAL pgque_fifo.pgque_stats_v2(q.queue, NULL) AS s;

DROP FUNCTION pgque_fifo.pgque_lease_group_v2(
    text, text, double precision, integer, text, integer, double precision);
DROP FUNCTION pgque_fifo.pgque_bury_v1(text, text, bigint, text, double precision);

-- Create (if missing) the three roles and give each exactly what it needs; idempotent, so run
-- it again after every migrate (new functions start with no grants). Not part of the default
-- install: creating roles takes CREATEROLE, and handing the schema to p_admin takes membership
-- in it (a superuser has both). `pgque install --create-roles` calls it.
--   p_producer  publish (plain, batched, deduplicated) and the partition slot count
--   p_worker    claim, ack, nack, release, extend, dead_letter, stats and the wake-up channel;
--               it cannot publish: grant both roles to a login that consumes and republishes
--   p_admin     owns the schema and everything in it: install, migrate, dead letters,
--               redrive, unblock, pause, resume, group inspection, purge, the operator view
-- Neither producer nor worker may read or change a table (only schema_version, to check the
-- installed version) or drop anything; they reach the data only through the entry points.
-- Role names are identifiers quoted with format('%I'), never spliced in as text.
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_setup_roles_v1(
    p_producer text DEFAULT 'pgque_producer', p_worker text DEFAULT 'pgque_worker',
    p_admin text DEFAULT 'pgque_admin')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_role text;
    v_rel regclass;
    v_fn regprocedure;
    v_producer_fns text[] := ARRAY['pgque_publish_v1', 'pgque_publish_many_v1',
                                   'pgque_publish_dedup_v1', 'pgque_partition_slots_v1'];
    v_worker_fns text[] := ARRAY['pgque_claim_v1', 'pgque_claim_v2', 'pgque_ack_v1',
                                 'pgque_ack_many_v1', 'pgque_nack_v1', 'pgque_nack_v2',
                                 'pgque_release_lease_v1', 'pgque_extend_v1',
                                 'pgque_dead_letter_v1', 'pgque_dead_letter_v2',
                                 'pgque_stats_v1', 'pgque_stats_v2', 'pgque_channel_v1',
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

-- New functions are executable by PUBLIC until revoked (migration 0005's REVOKE covered only
-- what existed then).
REVOKE ALL ON FUNCTION pgque_fifo.pgque_lock_group_v2(text, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_error_at_v1(text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_bury_v2(
    text, text, bigint, text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_lease_group_v3(
    text, text, double precision, integer, text, integer, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_claim_v2(
    text, integer, double precision, integer, integer, text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_nack_v2(
    text, text, bigint, text, double precision, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_release_lease_v1(
    text, text, bigint, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_dead_letter_v2(
    text, text, bigint, text, text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_dead_letters_v2(text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_delete_dead_letters_v1(text, bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_redrive_v2(
    text, bigint[], boolean, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_pause_v1(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_resume_v1(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_group_info_v1(text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_group_v1(text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_group_page_v1(
    text, text, integer, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_groups_v1(
    text, text, integer, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_stats_v2(text, double precision) FROM PUBLIC;

-- Entry points run with their owner's rights and a pinned search_path (migration 0005);
-- CREATE OR REPLACE resets SECURITY DEFINER and SET: pin the replaced ones again.
ALTER FUNCTION pgque_fifo.pgque_candidates_v2(
    text, integer, integer, double precision, double precision, text, text[])
    SET lock_timeout = '20ms';
ALTER FUNCTION pgque_fifo.pgque_group_page_v1(text, text, integer, text, double precision)
    SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION pgque_fifo.pgque_claim_v1(
    text, integer, double precision, integer, integer, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_claim_v2(
    text, integer, double precision, integer, integer, text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_nack_v1(
    text, text, bigint, text, double precision, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_nack_v2(
    text, text, bigint, text, double precision, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_release_lease_v1(text, text, bigint, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_dead_letter_v1(text, text, bigint, text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_dead_letter_v2(
    text, text, bigint, text, text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_dead_letters_v2(text, integer, bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_delete_dead_letters_v1(text, bigint[])
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_redrive_v1(text, bigint[], double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_redrive_v2(text, bigint[], boolean, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_unblock_v1(text, text, boolean, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_pause_v1(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_resume_v1(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_group_v1(text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_groups_v1(text, text, integer, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_stats_v1(text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_stats_v2(text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

-- Roles set up before this migration (pgque_setup_roles_v1 at version 5-7) keep working
-- without a second role setup: the functions created above are owned by whoever migrates,
-- executable by nobody else. Where roles exist (a role other than the owner may execute
-- pgque_claim_v1 or pgque_publish_v1), every function goes to the owner of the older entry
-- points (the admin role), and each worker / producer role gets the new entry points of its
-- kind (the lists of pgque_setup_roles_v1 above). A database without roles is left as it is.
DO $$
DECLARE
    v_admin oid;
    v_fn regprocedure;
    v_role oid;
    v_worker_fns text[] := ARRAY['pgque_claim_v2', 'pgque_nack_v2', 'pgque_release_lease_v1',
                                 'pgque_dead_letter_v2', 'pgque_stats_v2'];
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
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace AND p.proowner <> v_admin
                 ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn,
                       (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = v_admin));
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
    FOR v_role IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc p,
                         LATERAL pg_catalog.aclexplode(p.proacl) a
                   WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                     AND p.proname = 'pgque_claim_v1' AND a.privilege_type = 'EXECUTE'
                     AND a.grantee <> p.proowner AND a.grantee <> 0
                   ORDER BY a.grantee LOOP
        FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                     WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                       AND p.proname = ANY (v_worker_fns) ORDER BY p.oid LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn,
                           (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = v_role));
        END LOOP;
    END LOOP;
END
$$;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (8, 'groups as first-class objects');
