-- Migration 0004: LISTEN/NOTIFY wake-up. Every change that makes a message claimable at once
-- (publish, publish_many, redrive and publish_dedup through publish, nack without delay,
-- unblock) notifies the queue's channel, pgque_channel_v1(queue), so idle workers LISTENing on
-- it claim at once instead of waiting for their next poll. The notification is sent at commit:
-- a publish inside a caller's transaction wakes workers only when that transaction commits.

CREATE FUNCTION pgque_fifo.pgque_channel_v1(p_queue text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'pgque_' || md5(p_queue)
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_v1(
    p_queue text, p_group_id text, p_event text, p_priority integer, p_now double precision)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    PERFORM pgque_fifo.pgque_lock_group_v1(p_queue, p_group_id, p_priority);
    INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
    VALUES (p_queue, p_group_id, p_event,
            COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision))
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
        INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
        SELECT p_queue, u.g, u.e, v_now
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_nack_v1(
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

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (4, 'listen notify');
