-- Migration 0009: settle and claim in one call (the fused worker loop).
--
-- * New entry point pgque_settle_claim_v1: settle a list of finished leases (ack, nack,
--   release, dead_letter, each exactly as its own entry point) and lease up to n new heads
--   (exactly as pgque_claim_v2), one transaction, one round trip.
-- * pgque_setup_roles_v1 grants it to the worker role; roles set up before this migration get
--   it here.

-- Settle finished leases and lease up to p_n new heads in one call (the fused worker loop: one
-- round trip per message in steady state). Item i of the arrays is one settlement: p_outcomes
-- 'ack', 'nack' (p_delays, p_errors), 'release' or 'dead_letter' (p_reasons, p_errors) of the
-- lease (p_group_ids, p_message_ids, p_tokens). Each acts exactly as its own entry point
-- (pgque_ack_v1, pgque_nack_v2, pgque_release_lease_v1, pgque_dead_letter_v2) would, fenced on
-- its own, in list order; then up to p_n heads are leased exactly as pgque_claim_v2 leases them
-- (p_n = 0: settle only). Everything is judged at one now.
-- Lock order (docs/postgres.md): first every settled group's row, in group-id byte order (input
-- order within a group), as pgque_ack_many_v1 takes them: pgque_held_v1 locks the row of a
-- lease still held (FOR NO KEY UPDATE) and leaves the others alone, as the settle would. Only
-- then are the settlements applied, in list order (so dead letters get their ids in list
-- order), each checking its fence again on the row this call now holds; a duplicate lease in
-- the list finds its token gone. Then the claim, whose candidate rows are taken with SKIP
-- LOCKED (a group this call just freed may be leased again by it, as the reference model
-- does). One result: a first row with the settlement results (settled, one per item, in order)
-- and NULL lease columns, then one row per lease with settled NULL.
CREATE FUNCTION pgque_fifo.pgque_settle_claim_v1(
    p_queue text, p_outcomes text[], p_group_ids text[], p_message_ids bigint[],
    p_tokens text[], p_delays double precision[], p_reasons text[], p_errors text[],
    p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_holders text[], p_now double precision)
RETURNS TABLE (settled boolean[], group_id text, message_id bigint, event text, token text,
               priority integer, attempt integer, expires_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_count integer := COALESCE(cardinality(p_outcomes), 0);
    v_out boolean[] := '{}';
    v_row record;
    v_i integer;
    v_after_until double precision := '-Infinity';
    v_after_group text := '';
    v_leased text[] := '{}';
    v_rows integer;
    v_cand record;
    v_got integer := 0;
BEGIN
    IF COALESCE(cardinality(p_group_ids), 0) <> v_count
       OR COALESCE(cardinality(p_message_ids), 0) <> v_count
       OR COALESCE(cardinality(p_tokens), 0) <> v_count
       OR COALESCE(cardinality(p_delays), 0) <> v_count
       OR COALESCE(cardinality(p_reasons), 0) <> v_count
       OR COALESCE(cardinality(p_errors), 0) <> v_count THEN
        RAISE EXCEPTION 'pgque: % outcomes but arrays of other lengths', v_count;
    END IF;
    FOR v_row IN
        SELECT u.g, u.m, u.t
          FROM unnest(p_group_ids, p_message_ids, p_tokens) WITH ORDINALITY AS u(g, m, t, n)
         ORDER BY u.g COLLATE "C", u.n
    LOOP
        PERFORM pgque_fifo.pgque_held_v1(p_queue, v_row.g, v_row.m, v_row.t);
    END LOOP;
    FOR v_i IN 1 .. v_count LOOP
        v_out[v_i] := CASE p_outcomes[v_i]
            WHEN 'ack' THEN pgque_fifo.pgque_ack_v1(
                p_queue, p_group_ids[v_i], p_message_ids[v_i], p_tokens[v_i], v_now)
            WHEN 'nack' THEN pgque_fifo.pgque_nack_v2(
                p_queue, p_group_ids[v_i], p_message_ids[v_i], p_tokens[v_i], p_delays[v_i],
                p_errors[v_i], v_now)
            WHEN 'release' THEN pgque_fifo.pgque_release_lease_v1(
                p_queue, p_group_ids[v_i], p_message_ids[v_i], p_tokens[v_i], v_now)
            WHEN 'dead_letter' THEN pgque_fifo.pgque_dead_letter_v2(
                p_queue, p_group_ids[v_i], p_message_ids[v_i], p_tokens[v_i], p_reasons[v_i],
                p_errors[v_i], v_now)
        END;
        IF v_out[v_i] IS NULL THEN
            RAISE EXCEPTION 'pgque: unknown settlement outcome %', p_outcomes[v_i];
        END IF;
    END LOOP;
    settled := v_out;
    RETURN NEXT;
    settled := NULL;
    -- The claim: pgque_claim_v2's rounds, with lease i labelled p_holders[i] (a worker filling
    -- several slots at once names each slot; NULL or a shorter array leaves the rest NULL).
    WHILE v_got < p_n LOOP
        v_rows := 0;
        FOR v_cand IN
            SELECT * FROM pgque_fifo.pgque_candidates_v2(
                p_queue, p_n - v_got, p_min_priority, v_now, v_after_until, v_after_group,
                v_leased)
        LOOP
            v_rows := v_rows + 1;
            v_after_until := v_cand.sort_until;
            v_after_group := v_cand.group_id;
            FOR v_row IN
                SELECT * FROM pgque_fifo.pgque_lease_group_v3(
                    p_queue, v_cand.group_id, p_visibility, p_max_attempts, p_on_exhausted,
                    p_min_priority, p_holders[v_got + 1], v_now)
            LOOP
                group_id := v_row.group_id;
                message_id := v_row.message_id;
                event := v_row.event;
                token := v_row.token;
                priority := v_row.priority;
                attempt := v_row.attempt;
                expires_at := v_row.expires_at;
                RETURN NEXT;
                v_got := v_got + 1;
                v_leased := v_leased || v_cand.group_id;
            END LOOP;
        END LOOP;
        EXIT WHEN v_rows = 0;
    END LOOP;
END
$$;

-- Create (if missing) the three roles and give each exactly what it needs; idempotent, so run
-- it again after every migrate (new functions start with no grants). Not part of the default
-- install: creating roles takes CREATEROLE, and handing the schema to p_admin takes membership
-- in it (a superuser has both). `pgque install --create-roles` calls it.
--   p_producer  publish (plain, batched, deduplicated) and the partition slot count
--   p_worker    claim, ack, nack, release, extend, dead_letter, the fused settle-and-claim,
--               stats and the wake-up channel;
--               it cannot publish: grant both roles to a login that consumes and republishes
--   p_admin     owns the schema and everything in it: install, migrate, dead letters,
--               redrive, unblock, pause, resume, group inspection, purge, the operator view
-- Neither producer nor worker may read or change a table (only schema_version, to check the
-- installed version) or drop anything; they reach the data only through the entry points.
-- Role names are identifiers quoted with format('%I'), never spliced in as text.
CREATE OR REPLACE FUNCTION pgque_fifo.pgque_setup_roles_v1(
    p_producer text DEFAULT 'pgque_producer', p_worker text DEFAULT 'pgque_worker',
    p_admin text DEFAULT 'pgque_admin')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_role text;
    v_rel regclass;
    v_fn regprocedure;
    v_producer_fns text[] := ARRAY['pgque_publish_v1', 'pgque_publish_many_v1',
                                   'pgque_publish_dedup_v1', 'pgque_partition_slots_v1'];
    v_worker_fns text[] := ARRAY['pgque_claim_v1', 'pgque_claim_v2', 'pgque_ack_v1',
                                 'pgque_ack_many_v1', 'pgque_nack_v1', 'pgque_nack_v2',
                                 'pgque_release_lease_v1', 'pgque_extend_v1',
                                 'pgque_dead_letter_v1', 'pgque_dead_letter_v2',
                                 'pgque_settle_claim_v1', 'pgque_stats_v1', 'pgque_stats_v2',
                                 'pgque_channel_v1', 'pgque_partition_slots_v1'];
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
                  WHERE c.relnamespace = 'pgque_fifo'::regnamespace AND c.relkind IN ('r', 'v')
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

-- New functions are executable by PUBLIC until revoked (migration 0005's REVOKE covered only
-- what existed then).
REVOKE ALL ON FUNCTION pgque_fifo.pgque_settle_claim_v1(
    text, text[], text[], bigint[], text[], double precision[], text[], text[], integer,
    double precision, integer, integer, text, text[], double precision) FROM PUBLIC;

-- Entry points run with their owner's rights and a pinned search_path (migration 0005).
ALTER FUNCTION pgque_fifo.pgque_settle_claim_v1(
    text, text[], text[], bigint[], text[], double precision[], text[], text[], integer,
    double precision, integer, integer, text, text[], double precision)
    SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp;

-- Roles set up before this migration (pgque_setup_roles_v1 at version 5-8) keep working
-- without a second role setup: the functions created above are owned by whoever migrates,
-- executable by nobody else. Where roles exist (a role other than the owner may execute
-- pgque_claim_v1 or pgque_publish_v1), every function goes to the owner of the older entry
-- points (the admin role), and each worker / producer role gets the new entry points of its
-- kind (the lists of pgque_setup_roles_v1 above). A database without roles is left as it is.
DO $$
DECLARE
    v_admin oid;
    v_fn regprocedure;
    v_role oid;
    v_worker_fns text[] := ARRAY['pgque_settle_claim_v1'];
BEGIN
    SELECT p.proowner INTO v_admin FROM pg_catalog.pg_proc p
     WHERE p.oid = 'pgque_fifo.pgque_claim_v1(text, integer, double precision, integer,'
                   ' integer, text, double precision)'::regprocedure;
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace = 'pgque_fifo'::regnamespace
           AND p.proname IN ('pgque_claim_v1', 'pgque_publish_v1')
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    ) THEN
        RETURN;
    END IF;
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace AND p.proowner <> v_admin
                 ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn,
                       (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = v_admin));
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
    FOR v_role IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc p,
                         LATERAL pg_catalog.aclexplode(p.proacl) a
                   WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                     AND p.proname = 'pgque_claim_v1' AND a.privilege_type = 'EXECUTE'
                     AND a.grantee <> p.proowner AND a.grantee <> 0
                   ORDER BY a.grantee LOOP
        FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                     WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                       AND p.proname = ANY (v_worker_fns) ORDER BY p.oid LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn,
                           (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = v_role));
        END LOOP;
    END LOOP;
END
$$;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (9, 'settle and claim');
