-- Migration 0013: resume lets a paused group's due scheduled messages in first.
--
-- pgque_resume_v1 looked at the group's messages without the scheduled ones that fell due
-- while it was paused: a paused group whose only message was such a one was taken for empty
-- and removed, and the message then made the group anew, with a fresh place in the round-robin
-- (ahead of groups waiting since before it: found by the model-agreement program). v2 lets them
-- join first, as group() does, at the caller's now. v1 stays for workers of the previous
-- release during a rolling upgrade.

-- Lift the hold of pgque_pause_v1; false if the group is not paused. Due scheduled messages
-- join first (pgque_promote_group_v1: never waits). A resumed group without messages is
-- removed.
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

REVOKE ALL ON FUNCTION pgque_fifo.pgque_resume_v2(text, text, double precision) FROM PUBLIC;
ALTER FUNCTION pgque_fifo.pgque_resume_v2(text, text, double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (13, 'resume lets due messages in');
