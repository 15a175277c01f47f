-- Live workers (docs/workers.md): each worker of a queue keeps one row of pgque_fifo.workers by
-- heartbeating on the server's clock; a clean stop deletes it; workers() lists the rows with
-- the unexpired leases held in each worker's name.

-- Register or refresh the worker p_worker_id of the queue at p_now (NULL: the server's clock):
-- its identity, concurrency, heartbeat interval and busy slots (JSON text, each with the seconds
-- it has been held; kept as given and read relative to last_heartbeat). A new row starts now.
-- First removes the rows of the queue's workers silent for longer than p_prune_s. Upserts one
-- row; the prune walks workers_heartbeat.
CREATE FUNCTION pgque_fifo.pgque_heartbeat_v1(
    p_queue text, p_worker_id text, p_holder text, p_host text, p_pid integer,
    p_version text, p_concurrency integer, p_every double precision, p_slots text,
    p_prune_s double precision, p_now double precision)
RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    DELETE FROM pgque_fifo.workers w
     WHERE w.queue = p_queue AND w.last_heartbeat < v_now - p_prune_s;
    INSERT INTO pgque_fifo.workers AS w
        (queue, worker_id, holder, host, pid, version, concurrency, heartbeat_every, slots,
         started_at, last_heartbeat)
    VALUES (p_queue, p_worker_id, p_holder, p_host, p_pid, p_version, p_concurrency, p_every,
            p_slots, v_now, v_now)
    ON CONFLICT (queue, worker_id) DO UPDATE
       SET holder = EXCLUDED.holder, host = EXCLUDED.host, pid = EXCLUDED.pid,
           version = EXCLUDED.version, concurrency = EXCLUDED.concurrency,
           heartbeat_every = EXCLUDED.heartbeat_every, slots = EXCLUDED.slots,
           last_heartbeat = EXCLUDED.last_heartbeat;
END
$$;

-- Remove the worker's row (a clean stop); false when it had none.
CREATE FUNCTION pgque_fifo.pgque_goodbye_v1(p_queue text, p_worker_id text)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    DELETE FROM pgque_fifo.workers w WHERE w.queue = p_queue AND w.worker_id = p_worker_id;
    RETURN FOUND;
END
$$;

-- The queue's workers by id (alive only unless p_include_gone: last heartbeat at most
-- p_alive_multiple intervals before p_now), one row per worker and lease held in its name: the
-- groups whose lease is unexpired at p_now and whose holder starts with the worker's holder and
-- a colon (lease columns NULL for a worker holding none). The leases come from the live leases
-- of the queue, found by index ranges (bounded by the leases out, never a scan of the queue's
-- groups).
CREATE FUNCTION pgque_fifo.pgque_workers_v1(
    p_queue text, p_include_gone boolean, p_alive_multiple double precision,
    p_now double precision)
RETURNS TABLE (worker_id text, holder text, host text, pid integer, version text,
               concurrency integer, heartbeat_every double precision, slots text,
               started_at double precision, last_heartbeat double precision, now_s double precision,
               group_id text, message_id bigint, lease_holder text,
               expires_at double precision)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    RETURN QUERY
        WITH listed AS (
            SELECT w.* FROM pgque_fifo.workers w
             WHERE w.queue = p_queue
               AND (p_include_gone
                    OR v_now - w.last_heartbeat <= p_alive_multiple * w.heartbeat_every)
        ), leased AS (
            -- Live leases of ready-to-claim groups walk the claim order index from p_now;
            -- paused and blocked ones (few) their own partial indexes.
            SELECT g.group_id, g.leased_id, g.holder, g.until
              FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) > v_now AND g.token IS NOT NULL
               AND EXISTS (SELECT 1 FROM listed)
            UNION ALL
            SELECT g.group_id, g.leased_id, g.holder, g.until
              FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.paused AND g.until > v_now AND g.token IS NOT NULL
               AND EXISTS (SELECT 1 FROM listed)
            UNION ALL
            SELECT g.group_id, g.leased_id, g.holder, g.until
              FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.blocked AND NOT g.paused AND g.until > v_now
               AND g.token IS NOT NULL AND EXISTS (SELECT 1 FROM listed)
        )
        SELECT l.worker_id, l.holder, l.host, l.pid, l.version, l.concurrency,
               l.heartbeat_every, l.slots, l.started_at, l.last_heartbeat, v_now,
               x.group_id, x.leased_id, x.holder, x.until
          FROM listed l
          LEFT JOIN leased x
            ON left(x.holder, length(l.holder) + 1) = l.holder || ':'
         ORDER BY l.worker_id, x.until, x.group_id;
END
$$;
