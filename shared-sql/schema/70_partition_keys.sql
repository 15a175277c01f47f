-- The partition-key layer (pgque.partition): the producer dedup window and the persisted slot
-- count of ordered (Tier B) queues. Its tables are in 00_tables.sql.

-- Delete up to p_limit expired dedup keys of one queue; returns how many. Rows another
-- transaction holds are skipped, so concurrent reapers never wait on each other.
CREATE FUNCTION pgque_fifo.pgque_dedup_reap_v1(
    p_queue text, p_limit integer, p_now double precision)
RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
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
RETURNS TABLE (message_id bigint, deduped boolean) LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
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
        v_id := pgque_fifo.pgque_publish_v2(p_queue, p_group_id, p_event, p_priority, NULL,
                                            v_now);
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
RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
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
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
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
RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    PERFORM 1 FROM pgque_fifo.dedup_keys k
     WHERE k.queue = p_queue
     ORDER BY k.dedup_key
       FOR UPDATE;
    DELETE FROM pgque_fifo.dedup_keys d WHERE d.queue = p_queue;
    DELETE FROM pgque_fifo.partition_slots s WHERE s.queue = p_queue;
END
$$;
