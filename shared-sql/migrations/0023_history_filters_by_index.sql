-- Migration 0023: the job history filtered by kind or by a failure's outcome reads an index.
--
-- history(kind=) and history(outcome=) walked the queue's records newest first (history_queue)
-- and dropped those of another kind or outcome: a rare kind, or the failures among acked
-- records, read every record of the queue (about 0.6 s a million records here; the dashboard's
-- history page filtered so took seconds at 10,000,000). Two indexes on the history table:
-- history_kind (queue, kind, id) and history_unacked (queue, outcome, id), partial, holding
-- only the records not acked (an acked record's insert adds no entry to it).
--   Changed body: pgque_history_v1 (a branch per index).
-- Building the indexes on an existing history locks each partition against inserts while it
-- is indexed: the settlements of queues whose history is on wait for the build (minutes at
-- tens of millions of records). Upgrade at a quiet time, or turn history off first.

CREATE INDEX history_kind ON pgque_fifo.history (queue, kind, id);
CREATE INDEX history_unacked ON pgque_fifo.history (queue, outcome, id) WHERE outcome <> 'acked';

-- Up to p_limit records of the queue newest first (id below p_after when given), matching every
-- filter given, none finished before p_since nor older than the queue's retention (keep_s) at
-- p_now. One static query per access path: a message's story (history_message), a group's
-- records (history_group), a kind's (history_kind), the records of an outcome other than acked
-- (history_unacked), else the queue's (history_queue); each an index walk backwards.
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_history_v1(
    p_queue text, p_group_id text, p_kind text, p_since double precision, p_outcome text,
    p_message_id bigint, p_limit integer, p_after bigint, p_now double precision)
RETURNS TABLE (id bigint, message_id bigint, group_id text, kind text, fkey text,
               outcome text, attempt integer, published_at double precision,
               started_at double precision, finished_at double precision, worker text,
               error text, reason text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_from double precision := COALESCE(p_since, '-Infinity');
    v_before bigint := COALESCE(p_after, 9223372036854775807);
    v_keep double precision;
BEGIN
    SELECT q.keep_s INTO v_keep FROM pgque_fifo.history_queues q WHERE q.queue = p_queue;
    IF v_keep IS NOT NULL THEN
        v_from := greatest(v_from, v_now - v_keep);
    END IF;
    IF p_message_id IS NOT NULL THEN
        RETURN QUERY
            SELECT h.id, h.message_id, h.group_id, h.kind, h.fkey, h.outcome, h.attempt,
                   h.published_at, h.started_at, h.finished_at, h.worker, h.error, h.reason
              FROM pgque_fifo.history h
             WHERE h.queue = p_queue AND h.message_id = p_message_id AND h.id < v_before
               AND h.finished_at >= v_from
               AND (p_group_id IS NULL OR h.group_id = p_group_id)
               AND (p_kind IS NULL OR h.kind = p_kind)
               AND (p_outcome IS NULL OR h.outcome = p_outcome)
             ORDER BY h.id DESC
             LIMIT p_limit;
    ELSIF p_group_id IS NOT NULL THEN
        RETURN QUERY
            SELECT h.id, h.message_id, h.group_id, h.kind, h.fkey, h.outcome, h.attempt,
                   h.published_at, h.started_at, h.finished_at, h.worker, h.error, h.reason
              FROM pgque_fifo.history h
             WHERE h.queue = p_queue AND h.group_id = p_group_id AND h.id < v_before
               AND h.finished_at >= v_from
               AND (p_kind IS NULL OR h.kind = p_kind)
               AND (p_outcome IS NULL OR h.outcome = p_outcome)
             ORDER BY h.id DESC
             LIMIT p_limit;
    ELSIF p_kind IS NOT NULL THEN
        RETURN QUERY
            SELECT h.id, h.message_id, h.group_id, h.kind, h.fkey, h.outcome, h.attempt,
                   h.published_at, h.started_at, h.finished_at, h.worker, h.error, h.reason
              FROM pgque_fifo.history h
             WHERE h.queue = p_queue AND h.kind = p_kind AND h.id < v_before
               AND h.finished_at >= v_from
               AND (p_outcome IS NULL OR h.outcome = p_outcome)
             ORDER BY h.id DESC
             LIMIT p_limit;
    ELSIF p_outcome IS NOT NULL AND p_outcome <> 'acked' THEN
        -- The literal "<> 'acked'" lets the plan (generic ones too) use the partial index.
        RETURN QUERY
            SELECT h.id, h.message_id, h.group_id, h.kind, h.fkey, h.outcome, h.attempt,
                   h.published_at, h.started_at, h.finished_at, h.worker, h.error, h.reason
              FROM pgque_fifo.history h
             WHERE h.queue = p_queue AND h.outcome = p_outcome AND h.outcome <> 'acked'
               AND h.id < v_before AND h.finished_at >= v_from
             ORDER BY h.id DESC
             LIMIT p_limit;
    ELSE
        RETURN QUERY
            SELECT h.id, h.message_id, h.group_id, h.kind, h.fkey, h.outcome, h.attempt,
                   h.published_at, h.started_at, h.finished_at, h.worker, h.error, h.reason
              FROM pgque_fifo.history h
             WHERE h.queue = p_queue AND h.id < v_before
               AND h.finished_at >= v_from
               AND (p_kind IS NULL OR h.kind = p_kind)
               AND (p_outcome IS NULL OR h.outcome = p_outcome)
             ORDER BY h.id DESC
             LIMIT p_limit;
    END IF;
END
$$;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (23, 'history filters by index');
