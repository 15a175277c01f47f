-- Migration 0021: browse and search (pgque.core.browse).
--
-- Operator inspection beside the groups listing: groups by id prefix (a range of the primary
-- key, or of each state's index), the messages behind their groups' heads with a preview of
-- their data, one message by id, a group's scheduled messages.
--   New entry points: pgque_groups_prefixed_v1, pgque_messages_v1, pgque_message_v1,
--   pgque_group_scheduled_v1; helpers pgque_prefix_end_v1 and pgque_group_prefix_page_v1.
--   Like the groups listing they are the admin role's only (no grant to producer or worker).
-- No table changes.

-- The least text above every text that starts with p_prefix, in byte order (COLLATE "C" over
-- UTF-8 is code point order), or NULL when none is: p_prefix <= id < this is the range of the
-- ids that start with p_prefix. The last character below U+10FFFF is bumped (past the
-- surrogates, which no text holds); the U+10FFFF after it are dropped.
CREATE FUNCTION pgque_fifo.pgque_prefix_end_v1(p_prefix text)
RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    v_text text := p_prefix;
    v_code integer;
BEGIN
    WHILE v_text <> '' LOOP
        v_code := ascii(right(v_text, 1));
        v_text := left(v_text, -1);
        IF v_code < 1114111 THEN
            v_code := v_code + 1;
            IF v_code BETWEEN 55296 AND 57343 THEN
                v_code := 57344;
            END IF;
            RETURN v_text || chr(v_code);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- pgque_group_page_v1 within the range of ids that start with p_prefix: each state's index
-- (the primary key, groups_paused, groups_blocked, the claim index's future range) read between
-- p_prefix and its end, so a page never walks past the prefix's groups.
CREATE FUNCTION pgque_fifo.pgque_group_prefix_page_v1(
    p_queue text, p_state text, p_limit integer, p_after text, p_prefix text,
    p_now double precision)
RETURNS text[] LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    v_from text := GREATEST(p_prefix, p_after) COLLATE "C";
    v_strict boolean := p_after COLLATE "C" >= p_prefix;
    v_end text := pgque_fifo.pgque_prefix_end_v1(p_prefix);
BEGIN
    -- v_from is the range's start, taken strictly (> p_after) when the cursor is inside it.
    IF v_end IS NULL THEN
        v_end := NULL;
    END IF;
    IF p_state IS NULL THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.group_id >= v_from COLLATE "C"
               AND (NOT v_strict OR g.group_id > v_from COLLATE "C")
               AND (v_end IS NULL OR g.group_id < v_end COLLATE "C")
               AND (NOT g.drained OR g.paused
                    OR (SELECT true FROM pgque_fifo.messages m
                         WHERE m.queue = g.queue AND m.group_id = g.group_id LIMIT 1))
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'paused' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.paused AND g.group_id >= v_from COLLATE "C"
               AND (NOT v_strict OR g.group_id > v_from COLLATE "C")
               AND (v_end IS NULL OR g.group_id < v_end COLLATE "C")
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'blocked' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.blocked AND NOT g.paused
               AND g.group_id >= v_from COLLATE "C"
               AND (NOT v_strict OR g.group_id > v_from COLLATE "C")
               AND (v_end IS NULL OR g.group_id < v_end COLLATE "C")
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state IN ('leased', 'parked') THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) > p_now AND COALESCE(g.until, 0) < 'Infinity'
               AND (g.token IS NOT NULL) = (p_state = 'leased')
               AND g.group_id >= v_from COLLATE "C"
               AND (NOT v_strict OR g.group_id > v_from COLLATE "C")
               AND (v_end IS NULL OR g.group_id < v_end COLLATE "C")
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'ready' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) <= p_now
               AND g.group_id >= v_from COLLATE "C"
               AND (NOT v_strict OR g.group_id > v_from COLLATE "C")
               AND (v_end IS NULL OR g.group_id < v_end COLLATE "C")
               AND (NOT g.drained
                    OR (SELECT true FROM pgque_fifo.messages m
                         WHERE m.queue = g.queue AND m.group_id = g.group_id LIMIT 1))
             ORDER BY g.group_id
             LIMIT p_limit);
    END IF;
    RAISE EXCEPTION 'pgque: unknown group state %', p_state;
END
$$;

-- pgque_groups_v1 with only the groups whose id starts with p_prefix (not empty).
CREATE FUNCTION pgque_fifo.pgque_groups_prefixed_v1(
    p_queue text, p_state text, p_limit integer, p_after text, p_prefix text,
    p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_ids text[];
BEGIN
    IF current_setting('transaction_read_only') <> 'on' THEN
        LOOP
            EXIT WHEN pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now) = 0;
        END LOOP;
    END IF;
    v_ids := pgque_fifo.pgque_group_prefix_page_v1(p_queue, p_state, p_limit,
                                                   COALESCE(p_after, ''), p_prefix, v_now);
    RETURN QUERY
        SELECT i.group_id, i.state, i.depth, i.priority, i.head_message_id, i.head_enqueued_at,
               i.head_attempts, i.lease_expires_at, i.lease_holder, i.resume_at, i.last_error
          FROM unnest(v_ids) WITH ORDINALITY AS u(id, n)
         CROSS JOIN LATERAL pgque_fifo.pgque_group_info_v1(p_queue, u.id, v_now) AS i
         ORDER BY u.n;
END
$$;

-- The messages behind the heads: with p_group_id, that group's in its order (messages_head,
-- cursor COALESCE(seq, id)); without, the queue's in id order (the primary key, cursor the id:
-- the walk passes the other queues' messages too, and counts them). Only p_kind's when given.
-- At most 10,000 rows are examined; a row stays out of the page once p_limit are kept. The
-- rows are the page's messages, then, when rows remain past the last one examined, one row
-- with message_id NULL whose page_cursor is where the next page starts (next_after).
-- Due scheduled messages join first, as in pgque_groups_v1.
CREATE FUNCTION pgque_fifo.pgque_messages_v1(
    p_queue text, p_group_id text, p_kind text, p_limit integer, p_after bigint,
    p_now double precision)
RETURNS TABLE (message_id bigint, group_id text, event_id text, kind text,
               enqueued_at double precision, is_head boolean, attempts integer, size integer,
               preview text, truncated boolean, page_cursor bigint)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp
SET plan_cache_mode = force_custom_plan AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_budget constant integer := 10000;
    v_examined integer := 0;
    v_kept integer := 0;
    v_last bigint;
    v_row record;
    v_event json;
    v_data text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'pgque: a messages page limit must be 1 to 1000, not %', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF current_setting('transaction_read_only') <> 'on' THEN
        LOOP
            EXIT WHEN pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now) = 0;
        END LOOP;
    END IF;
    FOR v_row IN
        SELECT m.id, m.queue, m.group_id, m.event, m.attempts, m.enqueued_at,
               COALESCE(m.seq, m.id) AS pos
          FROM pgque_fifo.messages m
         WHERE p_group_id IS NOT NULL AND m.queue = p_queue AND m.group_id = p_group_id
           AND COALESCE(m.seq, m.id) > COALESCE(p_after, -1)
         ORDER BY COALESCE(m.seq, m.id)
         LIMIT v_budget + 1
    LOOP
        IF v_kept >= p_limit OR v_examined >= v_budget THEN
            message_id := NULL;
            page_cursor := v_last;
            RETURN NEXT;
            RETURN;
        END IF;
        v_examined := v_examined + 1;
        v_last := v_row.pos;
        v_event := v_row.event::json;
        CONTINUE WHEN p_kind IS NOT NULL AND (v_event ->> 'kind') IS DISTINCT FROM p_kind;
        v_kept := v_kept + 1;
        v_data := (v_event -> 'data')::text;
        message_id := v_row.id;
        group_id := v_row.group_id;
        event_id := v_event ->> 'id';
        kind := v_event ->> 'kind';
        enqueued_at := v_row.enqueued_at;
        is_head := v_row.pos = (SELECT COALESCE(h.seq, h.id) FROM pgque_fifo.messages h
                                 WHERE h.queue = p_queue AND h.group_id = v_row.group_id
                                 ORDER BY COALESCE(h.seq, h.id) LIMIT 1);
        attempts := v_row.attempts;
        size := octet_length(v_row.event);
        preview := left(v_data, 200);
        truncated := length(v_data) > 200;
        page_cursor := v_row.pos;
        RETURN NEXT;
    END LOOP;
    FOR v_row IN
        SELECT m.id, m.queue, m.group_id, m.event, m.attempts, m.enqueued_at, m.id AS pos
          FROM pgque_fifo.messages m
         WHERE p_group_id IS NULL AND m.id > COALESCE(p_after, -1)
         ORDER BY m.id
         LIMIT v_budget + 1
    LOOP
        IF v_kept >= p_limit OR v_examined >= v_budget THEN
            message_id := NULL;
            page_cursor := v_last;
            RETURN NEXT;
            RETURN;
        END IF;
        v_examined := v_examined + 1;
        v_last := v_row.pos;
        CONTINUE WHEN v_row.queue <> p_queue;
        v_event := v_row.event::json;
        CONTINUE WHEN p_kind IS NOT NULL AND (v_event ->> 'kind') IS DISTINCT FROM p_kind;
        v_kept := v_kept + 1;
        v_data := (v_event -> 'data')::text;
        message_id := v_row.id;
        group_id := v_row.group_id;
        event_id := v_event ->> 'id';
        kind := v_event ->> 'kind';
        enqueued_at := v_row.enqueued_at;
        is_head := COALESCE(v_row.pos, 0) = (
            SELECT COALESCE(h.seq, h.id) FROM pgque_fifo.messages h
             WHERE h.queue = p_queue AND h.group_id = v_row.group_id
             ORDER BY COALESCE(h.seq, h.id) LIMIT 1);
        attempts := v_row.attempts;
        size := octet_length(v_row.event);
        preview := left(v_data, 200);
        truncated := length(v_data) > 200;
        page_cursor := v_row.pos;
        RETURN NEXT;
    END LOOP;
END
$$;

-- One message by id: in its group (pending or in flight; is_head when a claim delivers it
-- next, or holds it), else scheduled and not joined yet (due_at set). No row once it is
-- settled or unknown. Due scheduled messages join first, as in pgque_groups_v1.
CREATE FUNCTION pgque_fifo.pgque_message_v1(p_queue text, p_id bigint, p_now double precision)
RETURNS TABLE (message_id bigint, group_id text, event_id text, kind text,
               enqueued_at double precision, due_at double precision, is_head boolean,
               attempts integer, size integer, preview text, truncated boolean)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF current_setting('transaction_read_only') <> 'on' THEN
        LOOP
            EXIT WHEN pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now) = 0;
        END LOOP;
    END IF;
    RETURN QUERY
        SELECT m.id, m.group_id, e.j ->> 'id', e.j ->> 'kind', m.enqueued_at,
               NULL::double precision,
               COALESCE(m.seq, m.id) = (SELECT COALESCE(h.seq, h.id) FROM pgque_fifo.messages h
                                         WHERE h.queue = p_queue AND h.group_id = m.group_id
                                         ORDER BY COALESCE(h.seq, h.id) LIMIT 1),
               m.attempts, octet_length(m.event), left((e.j -> 'data')::text, 200),
               length((e.j -> 'data')::text) > 200
          FROM pgque_fifo.messages m
         CROSS JOIN LATERAL (SELECT m.event::json AS j) e
         WHERE m.id = p_id AND m.queue = p_queue;
    IF FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT s.id, s.group_id, e.j ->> 'id', e.j ->> 'kind', s.enqueued_at, s.due_at, false,
               0, octet_length(s.event), left((e.j -> 'data')::text, 200),
               length((e.j -> 'data')::text) > 200
          FROM pgque_fifo.scheduled s
         CROSS JOIN LATERAL (SELECT s.event::json AS j) e
         WHERE s.id = p_id AND s.queue = p_queue;
END
$$;

-- Up to p_limit (1 to 1,000) of p_group_id's scheduled messages not due by p_now with
-- id > p_after, in id order (scheduled_group: the group's scheduled messages, then sorted).
CREATE FUNCTION pgque_fifo.pgque_group_scheduled_v1(
    p_queue text, p_group_id text, p_limit integer, p_after bigint, p_now double precision)
RETURNS TABLE (id bigint, group_id text, due_at double precision, event text, priority integer,
               enqueued_at double precision)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp SET enable_seqscan = off AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'pgque: a scheduled page limit must be 1 to 1000, not %', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT s.id, s.group_id, s.due_at, s.event, s.priority::integer, s.enqueued_at
          FROM pgque_fifo.scheduled s
         WHERE s.queue = p_queue AND s.group_id = p_group_id AND s.id > COALESCE(p_after, 0)
           AND s.due_at > COALESCE(p_now,
                                   extract(epoch FROM clock_timestamp())::double precision)
         ORDER BY s.id
         LIMIT p_limit;
END
$$;

REVOKE ALL ON FUNCTION pgque_fifo.pgque_prefix_end_v1(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_group_prefix_page_v1(
    text, text, integer, text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_groups_prefixed_v1(
    text, text, integer, text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_messages_v1(
    text, text, text, integer, bigint, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_message_v1(text, bigint, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_group_scheduled_v1(
    text, text, integer, bigint, double precision) FROM PUBLIC;

-- Where roles exist (as in migration 0018), the new functions go to the owner of the older
-- entry points (the admin role). A database without roles is left as it is.
DO $$
DECLARE
    v_admin name;
    v_fn regprocedure;
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
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
                 WHERE p.pronamespace = 'pgque_fifo'::regnamespace AND r.rolname <> v_admin
                 ORDER BY p.oid LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', v_fn, v_admin);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
    END LOOP;
END
$$;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (21, 'browse and search');
