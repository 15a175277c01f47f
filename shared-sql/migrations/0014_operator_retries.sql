-- Migration 0014: the operator's retries.
--
-- * pgque_retry_now_v1: a group waiting out a retry delay becomes claimable at once, its
--   attempt count and last error kept (the operator fixed the cause).
-- * pgque_unblock_v2: unblock only if the head is still the message the operator looked at.
-- * pgque_redrive_v3: a message redriven in place keeps its dead letter's error as its last
--   error (the group keeps its history), and may end its group's retry delay.
-- v1 / v2 stay for workers and tools of the previous release during a rolling upgrade. Admin
-- functions: granted to no role (the admin role owns them).

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
