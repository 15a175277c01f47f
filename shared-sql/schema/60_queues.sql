-- Whole queues: the counts (stats), the operator view of every queue, and purge.

-- Counts of one queue at p_now, as if every scheduled message due by p_now had joined its group.
-- Each group is counted in at most one of paused, blocked, in_flight and parked, by precedence
-- (as group() names its state); groups counts every group, a paused empty one included, but
-- not a drained row without a message (pgque_release_v1). Due scheduled messages count in
-- messages (and their groups in groups, if not a group yet), their due time as their enqueue
-- time in oldest_age_s; scheduled and next_due_at count the ones not due by p_now.
CREATE FUNCTION pgque_fifo.pgque_stats_v3(p_queue text, p_now double precision)
RETURNS TABLE (groups bigint, messages bigint, in_flight bigint, parked bigint, blocked bigint,
               dead_letters bigint, oldest_age_s double precision,
               next_resume_at double precision, paused bigint, scheduled bigint,
               next_due_at double precision)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_due bigint;
    v_oldest_due double precision;
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
    -- The scheduled messages due by now, counted as joined.
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

-- Delete every message, group and dead letter of one queue. Locks in the documented order:
-- the queue's lock exclusively (it waits for every publish in flight into the queue, which
-- holds it shared, and new publishes wait for the purge), then the group rows in group-id byte
-- order (waiting for the claims and acks holding them), then their messages, then the dead
-- letters in id order. No publish can add to a held group, so nothing is orphaned, and every
-- publish lands wholly before or wholly after the purge. Messages without a group row at all
-- (written by hand, or left by an older release) go too.
CREATE FUNCTION pgque_fifo.pgque_purge_v1(p_queue text)
RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_groups text[];
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_queue, 70677176));
    v_groups := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                       WHERE g.queue = p_queue
                       ORDER BY g.group_id
                         FOR UPDATE);
    -- Then the queue's fairness clock row (a keyed claim holding it waits for no group row:
    -- it takes them SKIP LOCKED), so no keyed claim runs through the rest.
    PERFORM 1 FROM pgque_fifo.fair_queues q WHERE q.queue = p_queue FOR UPDATE;
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
    -- So do the queue's history records (its history setting stays: configuration).
    DELETE FROM pgque_fifo.history h WHERE h.queue = p_queue;
    -- The keys' claim history goes; the policies stay (configuration), and so does the clock.
    DELETE FROM pgque_fifo.fair_keys k WHERE k.queue = p_queue AND k.fkey <> '';
    UPDATE pgque_fifo.fair_keys k SET finish = 0, tokens = NULL, tokens_at = NULL
     WHERE k.queue = p_queue;
END
$$;
