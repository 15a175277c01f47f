-- Least privilege. Every entry point runs with its owner's rights (SECURITY DEFINER) and a
-- pinned search_path, written on the function itself (SET search_path = pg_catalog, pgque_fifo,
-- pg_temp), so a caller needs no privilege on the tables and cannot plant a look-alike function
-- or operator earlier on its own search_path. pg_temp comes last so a temporary object can never
-- shadow one of ours. Objects inside the bodies are schema-qualified as well. The helpers the
-- entry points call (lock_group, release, bury, candidates, lease_group, held, ...) stay
-- SECURITY INVOKER: they run inside an entry point, with its rights and its search_path, and
-- nobody else may call them.
-- A new function in a later migration must follow the same rules: REVOKE EXECUTE from PUBLIC
-- (the REVOKE at the end of this file covers only a fresh install), SECURITY DEFINER with the
-- pinned search_path for an entry point, and a line in pgque_setup_roles_v1's lists.

-- Create (if missing) the three roles and give each exactly what it needs; idempotent, so run
-- it again after every migrate (new functions start with no grants). Not part of the default
-- install: creating roles takes CREATEROLE, and handing the schema to p_admin takes membership
-- in it (a superuser has both). `pgque install --create-roles` calls it.
--   p_producer  publish (plain, batched, deduplicated, delayed), cancel and list scheduled
--               messages, publish periodic ticks, and the partition slot count
--   p_worker    claim, ack, nack, release, extend, dead_letter, the fused settle-and-claim,
--               stats, the next due time, the wake-up channel, the queue's history
--               setting and its partitions' upkeep (the transport option history), and its
--               own heartbeat and goodbye (live workers);
--               it cannot publish: grant both roles to a login that consumes and republishes
--   p_admin     owns the schema and everything in it: install, migrate, dead letters,
--               redrive, unblock, pause, resume, group inspection, purge, the operator view
-- Neither producer nor worker may read or change a table (only schema_version, to check the
-- installed version) or drop anything; they reach the data only through the entry points.
-- Role names are identifiers quoted with format('%I'), never spliced in as text.
CREATE FUNCTION pgque_fifo.pgque_setup_roles_v1(
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

-- Only the schema's owner (and superusers) may call anything until roles are granted.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgque_fifo FROM PUBLIC;
REVOKE ALL ON SCHEMA pgque_fifo FROM PUBLIC;
