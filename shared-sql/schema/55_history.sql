-- Job history (docs/history.md): record what happened to each message of a queue whose history
-- is on (a row in history_queues), read it back, and keep it bounded by dropping whole day
-- partitions of pgque_fifo.history.

-- Record one settlement of message p_message_id, still in its group p_group_id (called by the
-- settling functions before the message leaves or changes): its kind, key, attempts and join
-- time from the rows, the lease's start and holder from the group when p_leased. A dead letter
-- without p_error records the message's last error. Nothing when the queue's history is off.
-- Reads the rows the caller holds; inserts one row (no lock beyond the insert's own).
CREATE FUNCTION pgque_fifo.pgque_history_add_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_outcome text, p_leased boolean,
    p_error text, p_reason text, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.history_queues q WHERE q.queue = p_queue) THEN
        RETURN;
    END IF;
    INSERT INTO pgque_fifo.history
        (queue, message_id, group_id, kind, fkey, outcome, attempt, published_at, started_at,
         finished_at, worker, error, reason)
    SELECT p_queue, m.id, p_group_id, COALESCE(m.event::json ->> 'kind', ''), g.fkey, p_outcome,
           m.attempts, m.enqueued_at, CASE WHEN p_leased THEN g.leased_at END, p_now,
           CASE WHEN p_leased THEN g.holder END,
           COALESCE(p_error, CASE WHEN p_outcome IN ('dead_lettered', 'exhausted')
                                  THEN m.last_error END),
           p_reason
      FROM pgque_fifo.messages m
      JOIN pgque_fifo.groups g ON g.queue = p_queue AND g.group_id = p_group_id
     WHERE m.id = p_message_id;
END
$$;

-- Turn the queue's history on with a retention (p_keep_s seconds and/or p_max_rows records), or
-- off (p_on false: the row goes, the records stay). Upserts or deletes one history_queues row.
CREATE FUNCTION pgque_fifo.pgque_set_history_v1(
    p_queue text, p_on boolean, p_keep_s double precision, p_max_rows bigint)
RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    IF NOT p_on THEN
        DELETE FROM pgque_fifo.history_queues q WHERE q.queue = p_queue;
        RETURN;
    END IF;
    INSERT INTO pgque_fifo.history_queues (queue, keep_s, max_rows)
    VALUES (p_queue, p_keep_s, p_max_rows)
    ON CONFLICT (queue) DO UPDATE SET keep_s = EXCLUDED.keep_s, max_rows = EXCLUDED.max_rows;
END
$$;

-- Up to p_limit records of the queue newest first (id below p_after when given), matching every
-- filter given, none finished before p_since nor older than the queue's retention (keep_s) at
-- p_now. One static query per access path: a message's story (history_message), a group's
-- records (history_group), a kind's (history_kind), the records of an outcome other than acked
-- (history_unacked), else the queue's (history_queue); each an index walk backwards.
CREATE FUNCTION pgque_fifo.pgque_history_v1(
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

-- Keep the history table's day partitions: while some queue's history is on, create today's
-- and the next two days' (a record of a day without one lands in history_default); and prune,
-- oldest first, each past day that every queue with records in it lets go (records all older
-- than the queue's keep_s, or at least max_rows newer records of the queue after them) by
-- emptying it with TRUNCATE; the emptied days are dropped together once a month's worth has
-- gathered. A queue whose history is off constrains nothing. Returns how many days were
-- pruned. No step takes a lock that a settlement waits for, except the monthly DROP, whose
-- wait is cut at 5 ms. DDL waits for its locks at most lock_timeout: what cannot be done now
-- is done next time. Partition names are built from day numbers only, never from user text.
CREATE FUNCTION pgque_fifo.pgque_history_maintain_v1(p_now double precision)
RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp
SET lock_timeout = '200ms' AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_today bigint := floor(v_now / 86400)::bigint;
    v_day bigint;
    v_part record;
    v_q record;
    v_last bigint;
    v_newer bigint;
    v_keep boolean;
    v_full boolean;
    v_pruned integer := 0;
    v_empty text[] := '{}';
    v_name text;
BEGIN
    FOR v_day IN v_today .. v_today + 2 LOOP
        EXIT WHEN NOT EXISTS (SELECT 1 FROM pgque_fifo.history_queues);
        IF to_regclass(format('pgque_fifo.history_d%s', v_day)) IS NULL THEN
            -- A table of its own, then attached: ATTACH takes the parent's SHARE UPDATE
            -- EXCLUSIVE lock, which no settlement (ROW EXCLUSIVE) waits for; CREATE TABLE ...
            -- PARTITION OF would take ACCESS EXCLUSIVE and queue every settlement behind it.
            BEGIN
                EXECUTE format('CREATE TABLE pgque_fifo.%I (LIKE pgque_fifo.history'
                               ' INCLUDING DEFAULTS, CHECK (finished_at >= %L AND'
                               ' finished_at < %L))',
                               'history_d' || v_day, v_day * 86400, (v_day + 1) * 86400);
                EXECUTE format('ALTER TABLE pgque_fifo.history ATTACH PARTITION pgque_fifo.%I'
                               ' FOR VALUES FROM (%L) TO (%L)',
                               'history_d' || v_day, v_day * 86400, (v_day + 1) * 86400);
            EXCEPTION WHEN lock_not_available OR check_violation OR duplicate_table THEN
                NULL;
            END;
        END IF;
    END LOOP;
    FOR v_part IN
        SELECT c.relname AS name, substr(c.relname, 10)::bigint AS day
          FROM pg_catalog.pg_inherits i
          JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'pgque_fifo.history'::regclass
           AND c.relname ~ '^history_d[0-9]+$'
         ORDER BY 2
    LOOP
        EXIT WHEN v_part.day >= v_today;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgque_fifo.%I)', v_part.name) INTO v_full;
        IF NOT v_full THEN
            v_empty := v_empty || v_part.name::text;
            CONTINUE;
        END IF;
        v_keep := false;
        FOR v_q IN SELECT q.queue, q.keep_s, q.max_rows FROM pgque_fifo.history_queues q
                    ORDER BY q.queue LOOP
            EXECUTE format('SELECT max(h.id) FROM pgque_fifo.%I h WHERE h.queue = $1',
                           v_part.name)
               INTO v_last USING v_q.queue;
            CONTINUE WHEN v_last IS NULL;
            CONTINUE WHEN v_q.keep_s IS NOT NULL
                      AND (v_part.day + 1) * 86400 <= v_now - v_q.keep_s;
            IF v_q.max_rows IS NOT NULL THEN
                SELECT count(*) INTO v_newer
                  FROM (SELECT 1 FROM pgque_fifo.history h
                         WHERE h.queue = v_q.queue AND h.id > v_last
                         LIMIT v_q.max_rows) AS newer;
                CONTINUE WHEN v_newer >= v_q.max_rows;
            END IF;
            v_keep := true;
            EXIT;
        END LOOP;
        EXIT WHEN v_keep;
        -- Prune the day: TRUNCATE locks that partition alone (settlements write today's and
        -- never wait for it), and its files go with it.
        BEGIN
            EXECUTE format('TRUNCATE pgque_fifo.%I', v_part.name);
            v_pruned := v_pruned + 1;
        EXCEPTION WHEN lock_not_available THEN
            EXIT;
        END;
    END LOOP;
    -- The emptied days go once 31 have gathered, in one DROP: a DROP needs the parent's
    -- ACCESS EXCLUSIVE lock, which queues every settlement behind it while it waits, so the
    -- wait is cut at 5 ms (a later run tries again) and happens about once a month.
    IF cardinality(v_empty) >= 31 THEN
        BEGIN
            PERFORM set_config('lock_timeout', '5ms', true);
            FOREACH v_name IN ARRAY v_empty LOOP  -- the first takes the lock for them all
                EXECUTE format('DROP TABLE pgque_fifo.%I', v_name);
            END LOOP;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END IF;
    RETURN v_pruned;
END
$$;
