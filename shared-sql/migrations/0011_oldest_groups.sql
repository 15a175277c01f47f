-- Migration 0011: the groups with the oldest heads (issue 18).
--
-- * Index messages_enqueued: a queue's messages in enqueue-time order.
-- * pgque_oldest_groups_v1: the groups holding a message, the oldest head first (the
--   dashboard's "stuck first" view and the metrics' top-K gauge). An operator entry point,
--   like pgque_groups_v1: granted to no role.
--
-- Building the index takes a SHARE lock on messages (publishes wait, claims and reads do not)
-- for the time it needs to read the table once: about a second per million messages here.

-- Messages in enqueue-time order within a queue: the walk of pgque_oldest_groups_v1.
CREATE INDEX messages_enqueued ON pgque_fifo.messages (queue, enqueued_at, id);

-- The groups of p_queue that hold a message, the oldest head first: ordered by the head's
-- enqueue time, then by group id in byte order, at most p_limit of them, only those in
-- p_state if it is not NULL (the state names of pgque_group_info_v1). Due scheduled messages
-- join first, as in pgque_groups_v1.
--
-- messages_enqueued is walked from the oldest message; a message is a head when its group
-- holds no message before it (one probe of messages_head), so heads come out in enqueue-time
-- order and the walk stops after p_limit of them: it reads the messages older than the
-- p_limit-th oldest head (few, unless a group holds a long backlog older than the others'
-- heads: docs/postgres.md). A second walk takes every head of that last enqueue time too, so
-- a tie is broken by group id.
CREATE FUNCTION pgque_fifo.pgque_oldest_groups_v1(
    p_queue text, p_state text, p_limit integer, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_last double precision;
BEGIN
    IF current_setting('transaction_read_only') <> 'on' THEN
        LOOP
            EXIT WHEN pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now) = 0;
        END LOOP;
    END IF;
    SELECT max(h.enqueued_at) INTO v_last
      FROM (SELECT m.enqueued_at
              FROM pgque_fifo.messages m
             WHERE m.queue = p_queue
               AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages b
                                WHERE b.queue = p_queue AND b.group_id = m.group_id
                                  AND COALESCE(b.seq, b.id) < COALESCE(m.seq, m.id))
               AND (p_state IS NULL
                    OR (SELECT i.state
                          FROM pgque_fifo.pgque_group_info_v1(p_queue, m.group_id, v_now) AS i)
                       = p_state)
             ORDER BY m.enqueued_at, m.id
             LIMIT p_limit) AS h;
    IF v_last IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT i.group_id, i.state, i.depth, i.priority, i.head_message_id, i.head_enqueued_at,
               i.head_attempts, i.lease_expires_at, i.lease_holder, i.resume_at, i.last_error
          FROM pgque_fifo.messages m
         CROSS JOIN LATERAL pgque_fifo.pgque_group_info_v1(p_queue, m.group_id, v_now) AS i
         WHERE m.queue = p_queue AND m.enqueued_at <= v_last
           AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages b
                            WHERE b.queue = p_queue AND b.group_id = m.group_id
                              AND COALESCE(b.seq, b.id) < COALESCE(m.seq, m.id))
           AND (p_state IS NULL OR i.state = p_state)
         ORDER BY m.enqueued_at, m.group_id
         LIMIT p_limit;
END
$$;

REVOKE ALL ON FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (11, 'oldest groups');
