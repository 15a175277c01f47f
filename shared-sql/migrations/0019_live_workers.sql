-- Migration 0019: live workers (docs/workers.md).
--
-- Each worker of a queue registers and heartbeats on the server's clock (one row of
-- pgque_fifo.workers, upserted), says goodbye on a clean stop (the row goes), and workers()
-- lists the rows with the unexpired leases held in each worker's name.
--   Tables: new table workers (index workers_heartbeat).
--   New entry points: pgque_heartbeat_v1, pgque_goodbye_v1, pgque_workers_v1.
--   Changed bodies: pgque_setup_roles_v1 (the worker role may heartbeat and say goodbye).
-- The new table starts empty; nothing else changes.

-- Live workers (docs/workers.md; the functions are in 57_workers.sql). One row per worker of a
-- queue, kept by its heartbeats (server time) and deleted by its goodbye; a row silent for
-- longer than an hour is removed by the next heartbeat of the queue. holder is the prefix of the
-- worker's claims' holder labels (host:pid), which finds its leases among the groups; slots is
-- what its busy slots held at the last heartbeat (JSON text, read by the client).
CREATE TABLE pgque_fifo.workers (
    queue           text COLLATE "C" NOT NULL,
    worker_id       text COLLATE "C" NOT NULL,
    holder          text NOT NULL,
    host            text NOT NULL,
    pid             integer NOT NULL,
    version         text NOT NULL,
    concurrency     integer NOT NULL,
    heartbeat_every double precision NOT NULL,
    slots           text NOT NULL DEFAULT '[]',
    started_at      double precision NOT NULL,
    last_heartbeat  double precision NOT NULL,
    PRIMARY KEY (queue, worker_id)
);
-- The prune of silent rows walks a queue's rows by their last heartbeat.
CREATE INDEX workers_heartbeat ON pgque_fifo.workers (queue, last_heartbeat);

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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_setup_roles_v1(
    p_producer text DEFAULT 'pgque_producer', p_worker text DEFAULT 'pgque_worker',
    p_admin text DEFAULT 'pgque_admin')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_role text;
    v_rel regclass;
    v_fn regprocedure;
    v_producer_fns text[] := ARRAY['pgque_publish_v2', 'pgque_publish_many_v2',
                                   'pgque_publish_dedup_v1', 'pgque_partition_slots_v1',
                                   'pgque_schedule_v2', 'pgque_schedule_many_v2',
                                   'pgque_cancel_v1', 'pgque_scheduled_v1',
                                   'pgque_publish_tick_v2', 'pgque_last_tick_v1'];
    v_worker_fns text[] := ARRAY['pgque_claim_v2', 'pgque_ack_v1', 'pgque_ack_many_v1',
                                 'pgque_nack_v2', 'pgque_release_lease_v1', 'pgque_extend_v1',
                                 'pgque_dead_letter_v2', 'pgque_settle_claim_v1',
                                 'pgque_stats_v3', 'pgque_next_due_v1',
                                 'pgque_channel_v1', 'pgque_partition_slots_v1',
                                 'pgque_set_history_v1', 'pgque_history_maintain_v1',
                                 'pgque_heartbeat_v1', 'pgque_goodbye_v1'];
BEGIN
    IF p_producer IS NULL OR p_worker IS NULL OR p_admin IS NULL
       OR cardinality(ARRAY(SELECT DISTINCT r FROM unnest(ARRAY[p_producer, p_worker, p_admin])
                            AS u(r))) <> 3 THEN
        RAISE EXCEPTION 'pgque: the producer, worker and admin roles must be three distinct names';
    END IF;
    FOREACH v_role IN ARRAY ARRAY[p_producer, p_worker, p_admin] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = v_role) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
        END IF;
    END LOOP;
    EXECUTE format('ALTER SCHEMA pgque_fifo OWNER TO %I', p_admin);
    FOR v_rel IN SELECT c.oid::regclass FROM pg_catalog.pg_class c
                  WHERE c.relnamespace = 'pgque_fifo'::regnamespace
                    AND c.relkind IN ('r', 'v', 'p')
                  ORDER BY c.oid LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO %I', v_rel, p_admin);
    END LOOP;
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn, p_admin);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
    REVOKE ALL ON SCHEMA pgque_fifo FROM PUBLIC;
    EXECUTE format('GRANT USAGE ON SCHEMA pgque_fifo TO %I, %I', p_producer, p_worker);
    EXECUTE format('GRANT SELECT ON pgque_fifo.schema_version TO %I, %I', p_producer, p_worker);
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                   AND p.proname = ANY (v_producer_fns) ORDER BY p.oid LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn, p_producer);
    END LOOP;
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                   AND p.proname = ANY (v_worker_fns) ORDER BY p.oid LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn, p_worker);
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION pgque_fifo.pgque_heartbeat_v1(
    text, text, text, text, integer, text, integer, double precision, text, double precision,
    double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_goodbye_v1(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_workers_v1(
    text, boolean, double precision, double precision) FROM PUBLIC;

-- Roles set up before this migration keep working without a second role setup (as in
-- migration 0018): where roles exist, the new table and functions go to the owner of the older
-- entry points (the admin role), and each worker role (one that may call pgque_claim_v2) gets
-- the heartbeat and the goodbye. A database without roles is left as it is.
DO $$
DECLARE
    v_admin name;
    v_fn regprocedure;
    v_rel regclass;
    v_role name;
BEGIN
    SELECT r.rolname INTO v_admin
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
     WHERE p.oid = 'pgque_fifo.pgque_claim_v2(text, integer, double precision, integer,'
                   ' integer, text, text, double precision)'::regprocedure;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace = 'pgque_fifo'::regnamespace
           AND p.proname IN ('pgque_claim_v2', 'pgque_publish_v2')
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    ) THEN
        RETURN;
    END IF;
    v_rel := 'pgque_fifo.workers'::regclass;
    EXECUTE format('ALTER TABLE %s OWNER TO %I', v_rel, v_admin);
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace AND r.rolname <> v_admin
                 ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn, v_admin);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
    FOR v_role IN SELECT DISTINCT r.rolname FROM pg_catalog.pg_proc p,
                         LATERAL pg_catalog.aclexplode(p.proacl) a
                         JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
                   WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                     AND p.proname = 'pgque_claim_v2' AND a.privilege_type = 'EXECUTE'
                     AND a.grantee <> p.proowner
                   ORDER BY 1 LOOP
        FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                     WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                       AND p.proname IN ('pgque_heartbeat_v1', 'pgque_goodbye_v1')
                     ORDER BY p.oid LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn, v_role);
        END LOOP;
    END LOOP;
END
$$;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (19, 'live workers');
