-- Migration 0007: claims that never close a deadlock and stay cheap behind drained rows; a
-- dedup reap and a partition purge that a caller's transaction cannot trip over (issue: no
-- deadlock, no orphan, no phantom group under any interleaving of two operations; found by
-- the mixed stress run and a review after migration 0006).
--
-- * pgque_candidates_v2 replaces v1: a keyset cursor on the claim order instead of a list of
--   groups to skip (a claim behind 1,000 drained rows in flight read each row once, not a
--   million times), and a short lock_timeout: PostgreSQL waits out an update chain even under
--   SKIP LOCKED, which let a claim and an ack_many close a deadlock; the claim now gives that
--   round up instead.
-- * pgque_claim_v1 walks the new cursor.
-- * pgque_publish_dedup_v1, inside a caller's transaction, reaps only keys below its own in
--   byte order (the reaped keys stay locked until that transaction ends).
-- * pgque_partition_purge_v1 locks the queue's keys in key order, then deletes them with a
--   fresh snapshot (the ctid delete missed a key taken over while it waited).
-- * Group rows without messages that an older release left behind become drained rows.


-- An older release could leave a group row without messages behind (a drain racing a publish
-- that then rolled back). Make such rows what a drain now leaves: drained, not counted by
-- stats, and adopted or deleted by the next claim that reaches it. A no-key update: it does
-- not wait for an older release's publish in flight (FOR KEY SHARE) and leaves its row in
-- place. (A fresh install has no such row.)
UPDATE pgque_fifo.groups g
   SET token = NULL, until = NULL, blocked = false, priority = 4, drained = true
 WHERE NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                    WHERE m.queue = g.queue AND m.group_id = g.group_id);

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

-- Delete the dedup keys and the slot count of one queue (tests, operators; pgque_purge_v1
-- deletes its messages). Keys are locked in key byte order, as every multi-row lock is, and
-- deleted by the next statement: its fresh snapshot sees the version a dedup publish we waited
-- for committed (a DELETE by ctid in the locking statement's snapshot missed it).
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_partition_purge_v1(p_queue text)
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

DROP FUNCTION pgque_fifo.pgque_candidates_v1(text, integer, integer, double precision, text[]);
REVOKE ALL ON FUNCTION pgque_fifo.pgque_candidates_v2(
    text, integer, integer, double precision, double precision, text, text[]) FROM PUBLIC;

-- CREATE OR REPLACE resets SECURITY DEFINER and SET: pin them again.
ALTER FUNCTION pgque_fifo.pgque_claim_v1(
    text, integer, double precision, integer, integer, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_candidates_v2(
    text, integer, integer, double precision, double precision, text, text[])
    SET lock_timeout = '20ms';
ALTER FUNCTION pgque_fifo.pgque_publish_dedup_v1(
    text, text, text, integer, text, double precision, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
ALTER FUNCTION pgque_fifo.pgque_partition_purge_v1(text)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (7, 'claim cursor and caller-safe reaps');
