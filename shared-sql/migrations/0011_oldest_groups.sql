-- Migration 0011: the groups with the oldest heads (issue 18).
--
-- * Index messages_enqueued: a queue's messages in enqueue-time order.
-- * pgque_oldest_groups_v1: the groups holding a message, the oldest head first (the
--   dashboard's "stuck first" view and the metrics' top-K gauge). An operator entry point,
--   like pgque_groups_v1: granted to no role.
-- * pgque_release_v1: a group whose last message was settled lets its due scheduled messages
--   in before it is dropped (it had a message at their due time, so it keeps its priority, as
--   the reference model has it; before, they made the group anew with their own priority).
--
-- Building the index takes a SHARE lock on messages (publishes, claims and acks wait, reads
-- go on) for the time it needs to read the table once: 1.6-2.4 s per million messages here.

-- Messages in enqueue-time order within a queue: the walk of pgque_oldest_groups_v1.
CREATE INDEX messages_enqueued ON pgque_fifo.messages (queue, enqueued_at, id);

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

REVOKE ALL ON FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;
-- Planned at each call with its own now (the future range of leased and parked groups).
ALTER FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    SET plan_cache_mode = force_custom_plan;

-- Free a group whose head was just settled, letting its due scheduled messages in first
-- (schema.sql tells the whole story of this function).
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_release_v1(p_queue text, p_group_id text, p_now double precision)
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

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (11, 'oldest groups');
