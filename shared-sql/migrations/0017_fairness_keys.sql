-- Migration 0017: fairness keys (docs/fairness.md).
--
-- A group belongs to a fairness key, fixed like its priority by the publish that gives it its
-- first message; claims of a queue that uses keys share the workers between keys first
-- (weighted fair share, caps counted from live leases, token buckets on the server's clock),
-- then between a key's groups round-robin as before.
--   Tables: groups, messages, scheduled and dead_letters get fkey ('' is the default key, so
--   every existing group lands in it); new index groups_key; new tables fair_queues (a keyed
--   queue's virtual clock), fair_keys (each key's finish tag and token bucket; index
--   fair_keys_rank) and key_policies.
--   New entry points: pgque_publish_v2, pgque_publish_many_v2, pgque_schedule_v2,
--   pgque_schedule_many_v2 and pgque_publish_tick_v2 (each with p_fkey; the v1s go, no release
--   has been published), the key policies (pgque_set_key_policy_v1, pgque_key_policy_v1,
--   pgque_delete_key_policy_v1), the keys listing (pgque_keys_v1, pgque_key_info_v1) and
--   pgque_group_key_v1; helpers pgque_fair_claim_v1, pgque_key_join_v1, pgque_key_seen_v1
--   (trigger groups_key_seen), pgque_key_policy_of_v1, pgque_key_tokens_v1, pgque_key_row_v1.
--   Changed bodies: pgque_claim_v2 and pgque_settle_claim_v1 (a keyed queue's claims),
--   pgque_lease_group_v3 (a drained group takes its first message's key), pgque_lock_join_v1,
--   pgque_join_due_v1 and pgque_promote_one_v1 (scheduled messages carry their key),
--   pgque_bury_v2, pgque_redrive_in_place_v1 and pgque_redrive_at_tail_v1 (dead letters keep
--   their key), pgque_purge_v1 (forgets the keys' claim history), pgque_publish_dedup_v1 (calls
--   pgque_publish_v2) and pgque_setup_roles_v1 (the new entry points' names).
-- Adding a column with a constant default rewrites no table; groups_key is built once over the
-- groups that exist.

ALTER TABLE pgque_fifo.groups ADD COLUMN fkey text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE pgque_fifo.messages ADD COLUMN fkey text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE pgque_fifo.dead_letters ADD COLUMN fkey text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE pgque_fifo.scheduled ADD COLUMN fkey text COLLATE "C" NOT NULL DEFAULT '';

-- Fairness keys (docs/fairness.md; the functions are in 45_fairness.sql). A queue that has
-- never seen a key nor a policy has no row in any of these tables, and its claims take the
-- round-robin path of pgque_candidates_v2 alone (one probe of fair_queues tells them).

-- The groups of each key in claim order, (COALESCE(until, 0), group_id) within (queue, fkey):
-- a keyed claim takes the next group of the key it serves from here, and counts the key's live
-- leases (token set, until > now) as the range past now. Every group is in it (blocked and
-- paused ones are left out by the claim's filter on the row: they are few).
CREATE INDEX groups_key ON pgque_fifo.groups (queue, fkey, (COALESCE(until, 0)), group_id);

-- One row per queue that uses fairness keys (a keyed publish or a key policy made it): the
-- virtual clock of its weighted fair share (pgque.core.fairness). Keyed claims lock it first.
CREATE TABLE pgque_fifo.fair_queues (
    queue text COLLATE "C" PRIMARY KEY,
    clock double precision NOT NULL DEFAULT 0
);

-- One row per (queue, key) that had a group since the queue became keyed, the default key ''
-- included: its finish tag and its token bucket (tokens at tokens_at; NULL: a full bucket).
-- In-flight counts are never stored: they are counted from the live leases of the key's groups
-- (groups_key), so a lease that expires frees its slot by itself. Rows stay when a key goes
-- idle (until a purge): claims walk fair_keys_rank, the claim order of the keys.
CREATE TABLE pgque_fifo.fair_keys (
    queue     text COLLATE "C" NOT NULL,
    fkey      text COLLATE "C" NOT NULL,
    finish    double precision NOT NULL DEFAULT 0,
    tokens    double precision,
    tokens_at double precision,
    PRIMARY KEY (queue, fkey)
);

-- The keys in claim order, (finish, fkey): read from the start it is the order of
-- pgque.core.fairness.claim_rank at any virtual clock.
CREATE INDEX fair_keys_rank ON pgque_fifo.fair_keys (queue, finish, fkey);

-- The key policies an operator stored (set_key_policy): fkey NULL is the queue's default policy
-- for keys without one of their own. burst NULL: max(1, ceil(rate)).
CREATE TABLE pgque_fifo.key_policies (
    queue         text COLLATE "C" NOT NULL,
    fkey          text COLLATE "C",
    weight        double precision NOT NULL CHECK (weight > 0),
    max_in_flight integer CHECK (max_in_flight >= 1),
    rate          double precision CHECK (rate > 0),
    per           double precision NOT NULL CHECK (per > 0),
    burst         integer CHECK (burst >= 1)
);

CREATE UNIQUE INDEX key_policies_key ON pgque_fifo.key_policies (queue, fkey);
CREATE UNIQUE INDEX key_policies_default ON pgque_fifo.key_policies (queue) WHERE fkey IS NULL;

-- New functions: the fairness keys (shared-sql/schema/45_fairness.sql).

CREATE FUNCTION pgque_fifo.pgque_key_seen_v1()
RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.fair_queues q WHERE q.queue = NEW.queue) THEN
        INSERT INTO pgque_fifo.fair_queues (queue) VALUES (NEW.queue) ON CONFLICT DO NOTHING;
        INSERT INTO pgque_fifo.fair_keys (queue, fkey) VALUES (NEW.queue, '')
        ON CONFLICT DO NOTHING;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.fair_keys k
                    WHERE k.queue = NEW.queue AND k.fkey = NEW.fkey) THEN
        INSERT INTO pgque_fifo.fair_keys (queue, fkey) VALUES (NEW.queue, NEW.fkey)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER groups_key_seen AFTER INSERT OR UPDATE OF fkey ON pgque_fifo.groups
    FOR EACH ROW WHEN (NEW.fkey <> '') EXECUTE FUNCTION pgque_fifo.pgque_key_seen_v1();

CREATE FUNCTION pgque_fifo.pgque_key_join_v1(p_queue text, p_group_id text, p_fkey text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgque_fifo.groups g SET fkey = p_fkey
     WHERE g.queue = p_queue AND g.group_id = p_group_id AND g.fkey <> p_fkey
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = p_group_id);
END
$$;

CREATE FUNCTION pgque_fifo.pgque_key_policy_of_v1(p_queue text, p_fkey text)
RETURNS TABLE (own boolean, weight double precision, max_in_flight integer,
               rate double precision, per double precision, burst integer)
LANGUAGE sql STABLE AS $$
    SELECT true, p.weight, p.max_in_flight, p.rate, p.per, p.burst
      FROM pgque_fifo.key_policies p
     WHERE p.queue = p_queue AND p.fkey = p_fkey
    UNION ALL
    SELECT false, p.weight, p.max_in_flight, p.rate, p.per, p.burst
      FROM pgque_fifo.key_policies p
     WHERE p.queue = p_queue AND p.fkey IS NULL
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.key_policies o
                        WHERE o.queue = p_queue AND o.fkey = p_fkey)
    UNION ALL
    SELECT false, 1.0::double precision, NULL::integer, NULL::double precision,
           1.0::double precision, NULL::integer
     WHERE NOT EXISTS (SELECT 1 FROM pgque_fifo.key_policies o
                        WHERE o.queue = p_queue AND (o.fkey = p_fkey OR o.fkey IS NULL))
$$;

CREATE FUNCTION pgque_fifo.pgque_key_tokens_v1(
    p_rate double precision, p_per double precision, p_burst integer,
    p_tokens double precision, p_tokens_at double precision, p_now double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_rate IS NULL THEN NULL
        WHEN p_tokens IS NULL OR p_tokens_at IS NULL
            THEN COALESCE(p_burst, greatest(1, ceil(p_rate)))::double precision
        ELSE least(COALESCE(p_burst, greatest(1, ceil(p_rate)))::double precision,
                   p_tokens + greatest(0.0, p_now - p_tokens_at) * p_rate / p_per)
    END
$$;

CREATE FUNCTION pgque_fifo.pgque_fair_claim_v1(
    p_queue text, p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_holders text[], p_now double precision)
RETURNS TABLE (group_id text, message_id bigint, event text, token text, priority integer,
               attempt integer, expires_at double precision)
LANGUAGE plpgsql
SET enable_sort = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_clock double precision;
    v_after_finish double precision := '-Infinity';
    v_after_key text := '';
    v_key text;
    v_finish double precision;
    v_tokens_was double precision;
    v_tokens_at double precision;
    v_weight double precision := 1.0;
    v_cap integer;
    v_rate double precision;
    v_per double precision := 1.0;
    v_burst integer;
    v_tokens double precision;
    v_group text;
    v_passed text[] := '{}';
    v_leased boolean;
    v_start double precision;
    v_got integer := 0;
    v_row record;
    v_policies boolean;
BEGIN
    SELECT q.clock INTO v_clock FROM pgque_fifo.fair_queues q
     WHERE q.queue = p_queue
       FOR UPDATE;
    -- The server's time is read once the clock row is ours (p_now NULL): a claim that waited
    -- for it must not charge tokens, count live leases or time its leases as of before.
    p_now := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_policies := EXISTS (SELECT 1 FROM pgque_fifo.key_policies p WHERE p.queue = p_queue);
    WHILE v_got < p_n LOOP
        IF NOT v_policies THEN
            -- Every key has weight 1, no cap and no rate: the next key in claim order that has
            -- a claimable group, and that group, in one statement (keys without one are passed
            -- over inside it).
            SELECT k.fkey, k.finish, c.group_id INTO v_key, v_finish, v_group
              FROM pgque_fifo.fair_keys k
             CROSS JOIN LATERAL (
                SELECT g.group_id FROM pgque_fifo.groups g
                 WHERE g.queue = p_queue AND g.fkey = k.fkey
                   AND COALESCE(g.until, 0) <= p_now
                   AND NOT g.blocked AND NOT g.paused AND g.priority >= p_min_priority
                   AND g.group_id <> ALL (v_passed)
                 ORDER BY COALESCE(g.until, 0), g.group_id
                 LIMIT 1
                   FOR NO KEY UPDATE SKIP LOCKED) AS c
             WHERE k.queue = p_queue AND (k.finish, k.fkey) > (v_after_finish, v_after_key)
             ORDER BY k.finish, k.fkey
             LIMIT 1;
            EXIT WHEN NOT FOUND;
        ELSE
            SELECT k.fkey, k.finish, k.tokens, k.tokens_at
              INTO v_key, v_finish, v_tokens_was, v_tokens_at
              FROM pgque_fifo.fair_keys k
             WHERE k.queue = p_queue AND (k.finish, k.fkey) > (v_after_finish, v_after_key)
             ORDER BY k.finish, k.fkey
             LIMIT 1;
            EXIT WHEN NOT FOUND;
            v_after_finish := v_finish;
            v_after_key := v_key;
            SELECT p.weight, p.max_in_flight, p.rate, p.per, p.burst
              INTO v_weight, v_cap, v_rate, v_per, v_burst
              FROM pgque_fifo.pgque_key_policy_of_v1(p_queue, v_key) AS p;
            IF v_cap IS NOT NULL
               AND (SELECT count(*) FROM (
                        SELECT 1 FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND g.fkey = v_key
                           AND COALESCE(g.until, 0) > p_now AND g.token IS NOT NULL
                         LIMIT v_cap) AS c) >= v_cap THEN
                CONTINUE;
            END IF;
            IF v_rate IS NOT NULL THEN
                v_tokens := pgque_fifo.pgque_key_tokens_v1(
                    v_rate, v_per, v_burst, v_tokens_was, v_tokens_at, p_now);
                IF v_tokens < 1 THEN
                    CONTINUE;
                END IF;
            END IF;
            SELECT g.group_id INTO v_group FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.fkey = v_key
               AND COALESCE(g.until, 0) <= p_now
               AND NOT g.blocked AND NOT g.paused AND g.priority >= p_min_priority
               AND g.group_id <> ALL (v_passed)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT 1
               FOR NO KEY UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
        END IF;
        v_leased := false;
        FOR v_row IN
            SELECT * FROM pgque_fifo.pgque_lease_group_v3(
                p_queue, v_group, p_visibility, p_max_attempts, p_on_exhausted,
                p_min_priority, p_holders[v_got + 1], p_now)
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
            v_leased := true;
        END LOOP;
        IF NOT v_leased THEN
            -- Nothing leased (the group was empty, blocked or exhausted): the key is not
            -- charged and stays where it is; its next group is tried.
            v_passed := v_passed || v_group;
            IF v_policies THEN
                v_after_finish := '-Infinity';
                v_after_key := '';
            END IF;
            CONTINUE;
        END IF;
        -- The charge: the clock moves to the claim's start, the key's finish tag past it.
        v_start := greatest(v_finish, v_clock);
        v_clock := v_start;
        v_after_finish := v_finish;
        v_after_key := v_key;
        UPDATE pgque_fifo.fair_keys k
           SET finish = v_start + 1.0 / v_weight,
               tokens = CASE WHEN v_rate IS NULL THEN k.tokens ELSE v_tokens - 1 END,
               -- a claim timed before the last charge (it waited for the clock row) refilled
               -- nothing: the bucket's time stays, so that interval is not refilled twice
               tokens_at = CASE WHEN v_rate IS NULL THEN k.tokens_at
                                ELSE greatest(p_now, COALESCE(k.tokens_at, p_now)) END
         WHERE k.queue = p_queue AND k.fkey = v_key;
    END LOOP;
    UPDATE pgque_fifo.fair_queues q SET clock = v_clock
     WHERE q.queue = p_queue AND q.clock <> v_clock;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_group_key_v1(p_queue text, p_group_id text)
RETURNS text LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
    SELECT CASE WHEN g.drained
                THEN COALESCE((SELECT m.fkey FROM pgque_fifo.messages m
                                WHERE m.queue = g.queue AND m.group_id = g.group_id
                                ORDER BY COALESCE(m.seq, m.id) LIMIT 1), g.fkey)
                ELSE g.fkey END
      FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id
$$;

CREATE FUNCTION pgque_fifo.pgque_set_key_policy_v1(
    p_queue text, p_fkey text, p_weight double precision, p_max_in_flight integer,
    p_rate double precision, p_per double precision, p_burst integer)
RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    INSERT INTO pgque_fifo.fair_queues (queue) VALUES (p_queue) ON CONFLICT DO NOTHING;
    INSERT INTO pgque_fifo.fair_keys (queue, fkey) VALUES (p_queue, '') ON CONFLICT DO NOTHING;
    IF p_fkey IS NULL THEN
        INSERT INTO pgque_fifo.key_policies AS p
            (queue, fkey, weight, max_in_flight, rate, per, burst)
        VALUES (p_queue, NULL, p_weight, p_max_in_flight, p_rate, p_per, p_burst)
        ON CONFLICT (queue) WHERE fkey IS NULL DO UPDATE
           SET weight = EXCLUDED.weight, max_in_flight = EXCLUDED.max_in_flight,
               rate = EXCLUDED.rate, per = EXCLUDED.per, burst = EXCLUDED.burst;
    ELSE
        INSERT INTO pgque_fifo.key_policies AS p
            (queue, fkey, weight, max_in_flight, rate, per, burst)
        VALUES (p_queue, p_fkey, p_weight, p_max_in_flight, p_rate, p_per, p_burst)
        ON CONFLICT (queue, fkey) WHERE fkey IS NOT NULL DO UPDATE
           SET weight = EXCLUDED.weight, max_in_flight = EXCLUDED.max_in_flight,
               rate = EXCLUDED.rate, per = EXCLUDED.per, burst = EXCLUDED.burst;
    END IF;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_key_policy_v1(p_queue text, p_fkey text)
RETURNS TABLE (weight double precision, max_in_flight integer, rate double precision,
               per double precision, burst integer)
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
    SELECT p.weight, p.max_in_flight, p.rate, p.per, p.burst FROM pgque_fifo.key_policies p
     WHERE p.queue = p_queue AND p.fkey IS NOT DISTINCT FROM p_fkey
$$;

CREATE FUNCTION pgque_fifo.pgque_delete_key_policy_v1(p_queue text, p_fkey text)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    DELETE FROM pgque_fifo.key_policies p
     WHERE p.queue = p_queue AND p.fkey IS NOT DISTINCT FROM p_fkey;
    RETURN FOUND;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_key_row_v1(p_queue text, p_fkey text, p_now double precision)
RETURNS TABLE (fkey text, listed boolean, own boolean, weight double precision,
               max_in_flight integer, rate double precision, per double precision,
               burst integer, in_flight bigint, groups bigint, messages bigint,
               oldest_age_s double precision, tokens double precision,
               next_token_at double precision)
LANGUAGE sql STABLE AS $$
    SELECT p_fkey, c.in_flight > 0 OR c.groups > 0 OR p.own, p.own, p.weight, p.max_in_flight,
           p.rate, p.per, p.burst, c.in_flight, c.groups, c.messages,
           CASE WHEN c.oldest IS NOT NULL THEN greatest(0.0, p_now - c.oldest) END, t.tokens,
           CASE WHEN t.tokens < 1 THEN p_now + (1 - t.tokens) * p.per / p.rate END
      FROM pgque_fifo.pgque_key_policy_of_v1(p_queue, p_fkey) AS p
     CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE g.token IS NOT NULL AND g.until > p_now) AS in_flight,
               count(*) FILTER (WHERE h.n > 0) AS groups,
               COALESCE(sum(h.n), 0)::bigint AS messages,
               min(h.oldest) AS oldest
          FROM pgque_fifo.groups g
          CROSS JOIN LATERAL (
              SELECT count(*) AS n, min(m.enqueued_at) AS oldest FROM pgque_fifo.messages m
               WHERE m.queue = g.queue AND m.group_id = g.group_id) AS h
         WHERE g.queue = p_queue AND g.fkey = p_fkey) AS c
     CROSS JOIN LATERAL (
        SELECT pgque_fifo.pgque_key_tokens_v1(
                   p.rate, p.per, p.burst, k.tokens, k.tokens_at, p_now) AS tokens
          FROM (SELECT 1) AS one
          LEFT JOIN pgque_fifo.fair_keys k ON k.queue = p_queue AND k.fkey = p_fkey) AS t
$$;

CREATE FUNCTION pgque_fifo.pgque_keys_v1(
    p_queue text, p_limit integer, p_after text, p_now double precision)
RETURNS TABLE (fkey text, own boolean, weight double precision, max_in_flight integer,
               rate double precision, per double precision, burst integer, in_flight bigint,
               groups bigint, messages bigint, oldest_age_s double precision,
               tokens double precision, next_token_at double precision)
LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_key text;
    v_row record;
    v_got integer := 0;
BEGIN
    FOR v_key IN
        SELECT u.k FROM (
            SELECT k.fkey AS k FROM pgque_fifo.fair_keys k WHERE k.queue = p_queue
            UNION
            SELECT p.fkey FROM pgque_fifo.key_policies p
             WHERE p.queue = p_queue AND p.fkey IS NOT NULL
            UNION
            SELECT ''::text COLLATE "C") AS u
         WHERE p_after IS NULL OR u.k > p_after COLLATE "C"
         ORDER BY u.k COLLATE "C"
    LOOP
        SELECT * INTO v_row FROM pgque_fifo.pgque_key_row_v1(p_queue, v_key, v_now);
        CONTINUE WHEN NOT v_row.listed;
        fkey := v_row.fkey;
        own := v_row.own;
        weight := v_row.weight;
        max_in_flight := v_row.max_in_flight;
        rate := v_row.rate;
        per := v_row.per;
        burst := v_row.burst;
        in_flight := v_row.in_flight;
        groups := v_row.groups;
        messages := v_row.messages;
        oldest_age_s := v_row.oldest_age_s;
        tokens := v_row.tokens;
        next_token_at := v_row.next_token_at;
        RETURN NEXT;
        v_got := v_got + 1;
        EXIT WHEN v_got >= p_limit;
    END LOOP;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_key_info_v1(p_queue text, p_fkey text, p_now double precision)
RETURNS TABLE (fkey text, own boolean, weight double precision, max_in_flight integer,
               rate double precision, per double precision, burst integer, in_flight bigint,
               groups bigint, messages bigint, oldest_age_s double precision,
               tokens double precision, next_token_at double precision)
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
    SELECT r.fkey, r.own, r.weight, r.max_in_flight, r.rate, r.per, r.burst, r.in_flight,
           r.groups, r.messages, r.oldest_age_s, r.tokens, r.next_token_at
      FROM pgque_fifo.pgque_key_row_v1(
               p_queue, p_fkey,
               COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision)) AS r
     WHERE r.listed
$$;

-- New versions of the publish entry points, with the fairness key (p_fkey).

CREATE FUNCTION pgque_fifo.pgque_publish_v2(
    p_queue text, p_group_id text, p_event text, p_priority integer, p_fkey text,
    p_now double precision)
RETURNS bigint LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_id bigint;
BEGIN
    -- The group's scheduled messages due by now join first: they are ahead of this one.
    PERFORM pgque_fifo.pgque_lock_join_v1(p_queue, p_group_id, p_priority, v_now);
    PERFORM pgque_fifo.pgque_key_join_v1(p_queue, p_group_id, COALESCE(p_fkey, ''));
    INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority, fkey)
    VALUES (p_queue, p_group_id, p_event, v_now, p_priority, COALESCE(p_fkey, ''))
    RETURNING id INTO v_id;
    -- Wake the workers LISTENing on the queue; sent at commit, so a rolled-back publish
    -- wakes nobody.
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_id;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_publish_many_v2(
    p_queue text, p_group_ids text[], p_events text[], p_priority integer, p_fkey text,
    p_now double precision)
RETURNS bigint[] LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_group text;
    v_ids bigint[];
BEGIN
    IF cardinality(p_group_ids) IS DISTINCT FROM cardinality(p_events) THEN
        RAISE EXCEPTION 'pgque: % group ids but % events',
            cardinality(p_group_ids), cardinality(p_events);
    END IF;
    -- Lock the groups in one global order so two batches never wait on each other in a cycle;
    -- each group's scheduled messages due by now join it first.
    FOR v_group IN
        SELECT DISTINCT u.g COLLATE "C" FROM unnest(p_group_ids) AS u(g) ORDER BY 1
    LOOP
        PERFORM pgque_fifo.pgque_lock_join_v1(p_queue, v_group, p_priority, v_now);
        PERFORM pgque_fifo.pgque_key_join_v1(p_queue, v_group, COALESCE(p_fkey, ''));
    END LOOP;
    -- Identity values are drawn as rows are produced, in item order: sorted ids = item order.
    WITH inserted AS (
        INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority, fkey)
        SELECT p_queue, u.g, u.e, v_now, p_priority, COALESCE(p_fkey, '')
          FROM unnest(p_group_ids, p_events) WITH ORDINALITY AS u(g, e, n)
         ORDER BY u.n
        RETURNING id
    )
    SELECT array_agg(i.id ORDER BY i.id) INTO v_ids FROM inserted AS i;
    -- One notification per transaction and channel: Postgres folds repeats.
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN COALESCE(v_ids, '{}');
END
$$;

CREATE FUNCTION pgque_fifo.pgque_schedule_v2(
    p_queue text, p_group_id text, p_event text, p_priority integer, p_delay double precision,
    p_fkey text, p_now double precision)
RETURNS bigint LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_id bigint;
BEGIN
    IF p_delay IS NULL OR NOT (p_delay > 0 AND p_delay <= 31622400) THEN
        RAISE EXCEPTION 'pgque: a schedule delay must be > 0 and at most 366 days, not %',
            p_delay USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (v_now + p_delay > '-Infinity' AND v_now + p_delay < 'Infinity') THEN
        RAISE EXCEPTION 'pgque: a schedule due time must be finite, not % + %', v_now, p_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    INSERT INTO pgque_fifo.scheduled
        (id, queue, group_id, event, priority, due_at, enqueued_at, fkey)
    VALUES (nextval('pgque_fifo.messages_id_seq'::regclass), p_queue, p_group_id,
            p_event, p_priority, v_now + p_delay, v_now, COALESCE(p_fkey, ''))
    RETURNING id INTO v_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_id;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_schedule_many_v2(
    p_queue text, p_group_ids text[], p_events text[], p_priority integer,
    p_delay double precision, p_fkey text, p_now double precision)
RETURNS bigint[] LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_count integer := COALESCE(cardinality(p_group_ids), 0);
    v_ids bigint[];
BEGIN
    IF v_count IS DISTINCT FROM COALESCE(cardinality(p_events), 0) THEN
        RAISE EXCEPTION 'pgque: % group ids but % events', v_count, cardinality(p_events);
    END IF;
    IF p_delay IS NULL OR NOT (p_delay > 0 AND p_delay <= 31622400) THEN
        RAISE EXCEPTION 'pgque: a schedule delay must be > 0 and at most 366 days, not %',
            p_delay USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (v_now + p_delay > '-Infinity' AND v_now + p_delay < 'Infinity') THEN
        RAISE EXCEPTION 'pgque: a schedule due time must be finite, not % + %', v_now, p_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_count = 0 THEN
        RETURN '{}';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    v_ids := ARRAY(SELECT n.id FROM (
                       SELECT nextval('pgque_fifo.messages_id_seq'::regclass) AS id
                         FROM generate_series(1, v_count)) AS n
                    ORDER BY n.id);
    INSERT INTO pgque_fifo.scheduled
        (id, queue, group_id, event, priority, due_at, enqueued_at, fkey)
    SELECT v_ids[u.n], p_queue, u.g, u.e, p_priority, v_now + p_delay, v_now,
           COALESCE(p_fkey, '')
      FROM unnest(p_group_ids, p_events) WITH ORDINALITY AS u(g, e, n);
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN v_ids;
END
$$;

CREATE FUNCTION pgque_fifo.pgque_publish_tick_v2(
    p_queue text, p_entry text, p_tick double precision, p_group_id text, p_event text,
    p_priority integer, p_fkey text, p_now double precision)
RETURNS bigint LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    IF p_tick IS NULL OR NOT (p_tick >= 0 AND p_tick < 'Infinity') THEN
        RAISE EXCEPTION 'pgque: a tick must be finite epoch seconds >= 0, not %', p_tick
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    INSERT INTO pgque_fifo.ticks AS t (queue, entry, tick)
    VALUES (p_queue, p_entry, p_tick)
    ON CONFLICT (queue, entry) DO UPDATE SET tick = EXCLUDED.tick
     WHERE t.tick < EXCLUDED.tick;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN pgque_fifo.pgque_publish_v2(p_queue, p_group_id, p_event, p_priority, p_fkey, p_now);
END
$$;

-- Changed bodies, same signatures: keys travel with messages, scheduled messages and dead
-- letters; claims of a keyed queue go to pgque_fair_claim_v1; purge forgets the keys' history.

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_lock_join_v1(
    p_queue text, p_group_id text, p_priority integer, p_now double precision)
RETURNS void LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    v_first smallint;
    v_first_key text;
    v_created boolean;
BEGIN
    SELECT s.priority, s.fkey INTO v_first, v_first_key FROM pgque_fifo.scheduled s
     WHERE s.queue = p_queue AND s.group_id = p_group_id AND s.due_at <= p_now
     ORDER BY s.due_at, s.id LIMIT 1;
    IF NOT FOUND THEN
        PERFORM pgque_fifo.pgque_lock_group_v2(p_queue, p_group_id, p_priority);
        RETURN;
    END IF;
    v_created := pgque_fifo.pgque_lock_group_v2(p_queue, p_group_id, v_first);
    -- The due messages join a group without messages: it takes the first one's key.
    PERFORM pgque_fifo.pgque_key_join_v1(p_queue, p_group_id, v_first_key);
    IF pgque_fifo.pgque_join_due_v1(p_queue, p_group_id, p_now, NULL) = 0 AND v_created THEN
        UPDATE pgque_fifo.groups g SET priority = p_priority
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_lease_group_v3(
    p_queue text, p_group_id text, p_visibility double precision, p_max_attempts integer,
    p_on_exhausted text, p_min_priority integer, p_holder text, p_now double precision)
RETURNS TABLE (group_id text, message_id bigint, event text, token text, priority integer,
               attempt integer, expires_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_paused boolean;
    v_drained boolean;
    v_id bigint;
    v_event text;
    v_attempts integer;
    v_head_priority smallint;
    v_head_key text;
    v_token text;
    v_priority smallint;
BEGIN
    LOOP
        SELECT g.paused, g.drained, h.id, h.event, h.attempts, h.priority, h.fkey
          INTO v_paused, v_drained, v_id, v_event, v_attempts, v_head_priority, v_head_key
          FROM pgque_fifo.groups g
          LEFT JOIN LATERAL (
              SELECT m.id, m.event, m.attempts, m.priority, m.fkey FROM pgque_fifo.messages m
               WHERE m.queue = g.queue AND m.group_id = g.group_id
               ORDER BY COALESCE(m.seq, m.id)
               LIMIT 1) AS h ON true
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
        IF v_paused THEN
            RETURN;
        END IF;
        IF v_id IS NULL THEN
            PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, p_now);
            RETURN;
        END IF;
        IF v_drained THEN
            UPDATE pgque_fifo.groups g
               SET drained = false, priority = v_head_priority, fkey = v_head_key
             WHERE g.queue = p_queue AND g.group_id = p_group_id;
            IF v_head_priority < p_min_priority THEN
                RETURN;
            END IF;
        END IF;
        IF p_max_attempts IS NOT NULL AND v_attempts >= p_max_attempts THEN
            IF p_on_exhausted = 'block' THEN
                UPDATE pgque_fifo.groups g
                   SET blocked = true, token = NULL, leased_id = NULL, holder = NULL
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
                RETURN;
            END IF;
            PERFORM pgque_fifo.pgque_bury_v2(
                p_queue, p_group_id, v_id, format('max_attempts (%s) exhausted', p_max_attempts),
                NULL, p_now);
            CONTINUE;
        END IF;
        UPDATE pgque_fifo.messages m SET attempts = m.attempts + 1 WHERE m.id = v_id;
        v_token := replace(gen_random_uuid()::text, '-', '');
        UPDATE pgque_fifo.groups g
           SET token = v_token, leased_id = v_id, holder = p_holder,
               until = p_now + p_visibility
         WHERE g.queue = p_queue AND g.group_id = p_group_id
        RETURNING g.priority INTO v_priority;
        group_id := p_group_id;
        message_id := v_id;
        event := v_event;
        token := v_token;
        priority := v_priority;
        attempt := v_attempts + 1;
        expires_at := p_now + p_visibility;
        RETURN NEXT;
        RETURN;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_claim_v2(
    p_queue text, p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_holder text, p_now double precision)
RETURNS TABLE (group_id text, message_id bigint, event text, token text, priority integer,
               attempt integer, expires_at double precision)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_after_until double precision := '-Infinity';
    v_after_group text := '';
    v_leased text[] := '{}';
    v_rows integer;
    v_cand record;
    v_got integer := 0;
    v_row record;
BEGIN
    -- Scheduled messages due by now join their groups first (pgque_promote_v1).
    PERFORM pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now);
    -- A queue that uses fairness keys shares the claims between keys first.
    IF EXISTS (SELECT 1 FROM pgque_fifo.fair_queues q WHERE q.queue = p_queue) THEN
        RETURN QUERY
            SELECT * FROM pgque_fifo.pgque_fair_claim_v1(
                p_queue, p_n, p_visibility, p_min_priority, p_max_attempts, p_on_exhausted,
                array_fill(p_holder, ARRAY[p_n]), p_now);
        RETURN;
    END IF;
    LOOP
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
                    p_min_priority, p_holder, v_now)
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
        EXIT WHEN v_rows = 0 OR v_got >= p_n;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_settle_claim_v1(
    p_queue text, p_outcomes text[], p_group_ids text[], p_message_ids bigint[],
    p_tokens text[], p_delays double precision[], p_reasons text[], p_errors text[],
    p_n integer, p_visibility double precision, p_min_priority integer,
    p_max_attempts integer, p_on_exhausted text, p_holders text[], p_now double precision)
RETURNS TABLE (settled boolean[], group_id text, message_id bigint, event text, token text,
               priority integer, attempt integer, expires_at double precision)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
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
    -- Scheduled messages due by now join their groups before the claim (pgque_promote_v1;
    -- it never waits for a group lock, so the settled rows held above cannot close a cycle).
    IF p_n > 0 THEN
        PERFORM pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now);
        -- A queue that uses fairness keys shares the claims between keys first.
        IF EXISTS (SELECT 1 FROM pgque_fifo.fair_queues q WHERE q.queue = p_queue) THEN
            RETURN QUERY
                SELECT NULL::boolean[], f.* FROM pgque_fifo.pgque_fair_claim_v1(
                    p_queue, p_n, p_visibility, p_min_priority, p_max_attempts,
                    p_on_exhausted, p_holders, p_now) AS f;
            RETURN;
        END IF;
    END IF;
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

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_bury_v2(
    p_queue text, p_group_id text, p_message_id bigint, p_reason text, p_error text,
    p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        DELETE FROM pgque_fifo.messages m WHERE m.id = p_message_id
        RETURNING m.queue, m.group_id, m.id, m.event, m.attempts, m.enqueued_at, m.last_error,
                  m.seq
    )
    INSERT INTO pgque_fifo.dead_letters
        (queue, group_id, message_id, event, priority, attempts, reason, enqueued_at, failed_at,
         error, seq, fkey)
    SELECT gone.queue, gone.group_id, gone.id, gone.event, g.priority, gone.attempts, p_reason,
           gone.enqueued_at, p_now, COALESCE(p_error, gone.last_error), gone.seq, g.fkey
      FROM gone
      JOIN pgque_fifo.groups g ON g.queue = gone.queue AND g.group_id = gone.group_id;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_redrive_in_place_v1(
    p_queue text, p_ids bigint[], p_now double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_groups text[] := '{}';
    v_created text[] := '{}';
    v_ids bigint[];
    v_count integer;
    v_row record;
    v_paused boolean;
    v_drained boolean;
    v_head_priority smallint;
    v_head_key text;
    v_first smallint;
BEGIN
    FOR v_row IN
        SELECT DISTINCT ON (d.group_id) d.group_id, d.priority FROM pgque_fifo.dead_letters d
         WHERE d.queue = p_queue AND (p_ids IS NULL OR d.id = ANY (p_ids))
         ORDER BY d.group_id, d.id
    LOOP
        -- The group's scheduled messages due by now joined it at their due times, before this
        -- redrive: they join first (pgque_join_due_v1), and a group the first of them made has
        -- its priority. A row created here for the dead letters alone is in v_created.
        v_first := NULL;
        SELECT s.priority INTO v_first FROM pgque_fifo.scheduled s
         WHERE s.queue = p_queue AND s.group_id = v_row.group_id AND s.due_at <= v_now
         ORDER BY s.due_at, s.id LIMIT 1;
        IF pgque_fifo.pgque_lock_group_v2(
               p_queue, v_row.group_id, COALESCE(v_first, v_row.priority)) THEN
            IF v_first IS NULL
               OR pgque_fifo.pgque_join_due_v1(p_queue, v_row.group_id, v_now, NULL) = 0 THEN
                v_created := v_created || v_row.group_id;
            END IF;
        ELSIF v_first IS NOT NULL THEN
            PERFORM pgque_fifo.pgque_join_due_v1(p_queue, v_row.group_id, v_now, NULL);
        END IF;
        v_groups := v_groups || v_row.group_id;
    END LOOP;
    IF cardinality(v_groups) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = ANY (v_groups)
     ORDER BY g.group_id
       FOR NO KEY UPDATE;
    v_ids := ARRAY(SELECT k.id FROM pgque_fifo.dead_letters k
                    WHERE k.queue = p_queue AND (p_ids IS NULL OR k.id = ANY (p_ids))
                      AND k.group_id = ANY (v_groups)
                    ORDER BY k.id
                      FOR UPDATE);
    -- A drained row is settled first, from the messages it has now (none of ours yet): with
    -- messages it is the group their first publish made (that message's priority); paused and
    -- empty it is a paused group whose priority stays; else it is no group and the redrive
    -- creates it, never served, with its first dead letter's priority. A row this redrive
    -- created takes the priority of the first dead letter it receives (the one it was created
    -- for may have gone elsewhere meanwhile).
    FOR v_row IN
        SELECT DISTINCT ON (d.group_id) d.group_id, d.priority, d.fkey
          FROM pgque_fifo.dead_letters d
         WHERE d.id = ANY (v_ids)
         ORDER BY d.group_id, d.id
    LOOP
        SELECT g.paused, g.drained INTO v_paused, v_drained FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
        IF v_row.group_id = ANY (v_created) THEN
            UPDATE pgque_fifo.groups g SET priority = v_row.priority, fkey = v_row.fkey
             WHERE g.queue = p_queue AND g.group_id = v_row.group_id
               AND (g.priority <> v_row.priority OR g.fkey <> v_row.fkey);
        ELSIF v_drained THEN
            SELECT m.priority, m.fkey INTO v_head_priority, v_head_key FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND m.group_id = v_row.group_id
             ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
            IF FOUND THEN
                UPDATE pgque_fifo.groups g
                   SET drained = false, priority = v_head_priority, fkey = v_head_key
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            ELSIF v_paused THEN
                UPDATE pgque_fifo.groups g SET drained = false
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            ELSE
                UPDATE pgque_fifo.groups g
                   SET drained = false, priority = v_row.priority, until = NULL, token = NULL,
                       leased_id = NULL, holder = NULL, blocked = false, fkey = v_row.fkey
                 WHERE g.queue = p_queue AND g.group_id = v_row.group_id;
            END IF;
        END IF;
    END LOOP;
    WITH src AS (
        SELECT DISTINCT ON (d.message_id) d.id, d.message_id, d.group_id, d.event, d.priority,
               d.seq, d.fkey
          FROM pgque_fifo.dead_letters d
         WHERE d.id = ANY (v_ids)
         ORDER BY d.message_id, d.id
    ),
    -- The original id and position; a message that somehow still exists keeps its dead letter.
    inserted AS (
        INSERT INTO pgque_fifo.messages
            (id, queue, group_id, event, attempts, enqueued_at, priority, last_error, seq, fkey)
        OVERRIDING SYSTEM VALUE
        SELECT s.message_id, p_queue, s.group_id, s.event, 0, v_now, s.priority, NULL, s.seq,
               s.fkey
          FROM src s
         ORDER BY s.message_id
        ON CONFLICT (id) DO NOTHING
        RETURNING id
    )
    DELETE FROM pgque_fifo.dead_letters d
     USING src s, inserted i
     WHERE d.id = s.id AND i.id = s.message_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    DELETE FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = ANY (v_groups) AND NOT g.paused
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = g.queue AND m.group_id = g.group_id);
    IF v_count > 0 THEN
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_redrive_at_tail_v1(
    p_queue text, p_ids bigint[], p_now double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_count integer;
    v_groups text[] := '{}';
    v_got text[];
    v_first_ids bigint[];
    v_first_priorities smallint[];
    v_first_keys text[];
    v_row record;
BEGIN
    FOR v_row IN
        SELECT DISTINCT ON (d.group_id) d.group_id, d.priority FROM pgque_fifo.dead_letters d
         WHERE d.queue = p_queue AND (p_ids IS NULL OR d.id = ANY (p_ids))
         ORDER BY d.group_id, d.id
    LOOP
        -- Scheduled messages due by now join the tail before the dead letters do.
        PERFORM pgque_fifo.pgque_lock_join_v1(p_queue, v_row.group_id, v_row.priority, v_now);
        v_groups := v_groups || v_row.group_id;
    END LOOP;
    IF cardinality(v_groups) = 0 THEN
        RETURN 0;
    END IF;
    WITH taken AS (
        DELETE FROM pgque_fifo.dead_letters d
         WHERE d.id IN (SELECT k.id FROM pgque_fifo.dead_letters k
                         WHERE k.queue = p_queue AND (p_ids IS NULL OR k.id = ANY (p_ids))
                           AND k.group_id = ANY (v_groups)
                         ORDER BY k.id
                           FOR UPDATE)
        RETURNING d.id, d.group_id, d.event, d.priority, d.fkey
    ),
    -- Identity values are drawn as rows are produced: message ids follow dead-letter ids.
    inserted AS (
        INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at, priority, fkey)
        SELECT p_queue, t.group_id, t.event, v_now, t.priority, t.fkey FROM taken t ORDER BY t.id
        RETURNING id, group_id, priority, fkey
    ),
    firsts AS (
        SELECT DISTINCT ON (i.group_id) i.group_id, i.id, i.priority, i.fkey FROM inserted i
         ORDER BY i.group_id, i.id
    )
    SELECT (SELECT count(*) FROM inserted), COALESCE(array_agg(f.group_id), '{}'),
           array_agg(f.id), array_agg(f.priority), array_agg(f.fkey)
      INTO v_count, v_got, v_first_ids, v_first_priorities, v_first_keys
      FROM firsts f;
    IF cardinality(v_got) < cardinality(v_groups) THEN
        DELETE FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = ANY (v_groups) AND g.group_id <> ALL (v_got)
           AND NOT g.paused
           AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                            WHERE m.queue = g.queue AND m.group_id = g.group_id);
    END IF;
    UPDATE pgque_fifo.groups g SET priority = f.priority, fkey = f.fkey
      FROM unnest(v_got, v_first_ids, v_first_priorities, v_first_keys)
           AS f(group_id, id, priority, fkey)
     WHERE g.queue = p_queue AND g.group_id = f.group_id
       AND (g.priority <> f.priority OR g.fkey <> f.fkey)
       AND NOT g.drained
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = f.group_id
                          AND COALESCE(m.seq, m.id) < f.id);
    IF v_count > 0 THEN
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_join_due_v1(
    p_queue text, p_group_id text, p_now double precision, p_limit integer)
RETURNS integer LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    v_count integer;
BEGIN
    -- "Anything due?" as the earliest due time (ORDER BY ... LIMIT 1): a generic plan of this
    -- function (PL/pgSQL's after a few calls) still descends the index for it, while one of
    -- "EXISTS ... due_at <= $now" may read the whole table.
    IF COALESCE((SELECT s.due_at FROM pgque_fifo.scheduled s
                  WHERE s.queue = p_queue AND s.group_id = p_group_id
                  ORDER BY s.due_at LIMIT 1) > p_now, true) THEN
        RETURN 0;
    END IF;
    WITH due AS (
        DELETE FROM pgque_fifo.scheduled s
         WHERE s.id IN (SELECT k.id FROM pgque_fifo.scheduled k
                         WHERE k.queue = p_queue AND k.group_id = p_group_id
                           AND k.due_at <= p_now
                         ORDER BY k.due_at, k.id
                         LIMIT p_limit
                           FOR UPDATE)
        RETURNING s.id, s.event, s.priority, s.due_at, s.fkey
    ),
    -- Output expressions are evaluated after the sort: positions follow (due_at, id).
    joined AS (
        INSERT INTO pgque_fifo.messages
            (id, queue, group_id, event, enqueued_at, priority, seq, fkey)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, p_queue, p_group_id, d.event, d.due_at, d.priority,
               nextval('pgque_fifo.messages_id_seq'::regclass), d.fkey
          FROM due d
         ORDER BY d.due_at, d.id
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM joined;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_promote_one_v1(
    p_queue text, p_group_id text, p_now double precision, p_limit integer)
RETURNS integer LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    v_priority smallint;
    v_fkey text;
BEGIN
    IF NOT pg_try_advisory_xact_lock(
            hashtextextended(p_queue || chr(31) || p_group_id, 70677175)) THEN
        RETURN 0;
    END IF;
    IF NOT pgque_fifo.pgque_share_group_v1(p_queue, p_group_id) THEN
        IF EXISTS (SELECT 1 FROM pgque_fifo.groups g
                    WHERE g.queue = p_queue AND g.group_id = p_group_id) THEN
            RETURN 0;
        END IF;
        SELECT s.priority, s.fkey INTO v_priority, v_fkey FROM pgque_fifo.scheduled s
         WHERE s.queue = p_queue AND s.group_id = p_group_id AND s.due_at <= p_now
         ORDER BY s.due_at, s.id LIMIT 1;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
        INSERT INTO pgque_fifo.groups (queue, group_id, priority, fkey)
        VALUES (p_queue, p_group_id, v_priority, v_fkey)
        ON CONFLICT (queue, group_id) DO NOTHING;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
    END IF;
    RETURN pgque_fifo.pgque_join_due_v1(p_queue, p_group_id, p_now, p_limit);
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_purge_v1(p_queue text)
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
    -- The keys' claim history goes; the policies stay (configuration), and so does the clock.
    DELETE FROM pgque_fifo.fair_keys k WHERE k.queue = p_queue AND k.fkey <> '';
    UPDATE pgque_fifo.fair_keys k SET finish = 0, tokens = NULL, tokens_at = NULL
     WHERE k.queue = p_queue;
END
$$;

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_publish_dedup_v1(
    p_queue text, p_group_id text, p_event text, p_priority integer,
    p_dedup_key text, p_ttl double precision, p_now double precision)
RETURNS TABLE (message_id bigint, deduped boolean) LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_taken boolean;
    v_id bigint;
BEGIN
    IF p_ttl IS NULL OR p_ttl <= 0 THEN
        RAISE EXCEPTION 'pgque: dedup ttl must be > 0, not %', p_ttl;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_queue, 70677176));
    -- Take the key: a new row, or an expired one taken over; 0 marks "publishing now".
    INSERT INTO pgque_fifo.dedup_keys AS d (queue, dedup_key, message_id, expires_at)
    VALUES (p_queue, p_dedup_key, 0, v_now + p_ttl)
    ON CONFLICT (queue, dedup_key) DO UPDATE
       SET message_id = 0, expires_at = EXCLUDED.expires_at
     WHERE d.expires_at <= v_now
    RETURNING true INTO v_taken;
    IF v_taken THEN
        v_id := pgque_fifo.pgque_publish_v2(p_queue, p_group_id, p_event, p_priority, NULL,
                                            v_now);
        UPDATE pgque_fifo.dedup_keys d SET message_id = v_id
         WHERE d.queue = p_queue AND d.dedup_key = p_dedup_key;
        message_id := v_id;
        deduped := false;
    ELSE
        SELECT d.message_id INTO message_id FROM pgque_fifo.dedup_keys d
         WHERE d.queue = p_queue AND d.dedup_key = p_dedup_key;
        deduped := true;
    END IF;
    IF transaction_timestamp() = statement_timestamp() THEN
        PERFORM pgque_fifo.pgque_dedup_reap_v1(p_queue, 16, v_now);
    ELSE
        DELETE FROM pgque_fifo.dedup_keys d
         WHERE d.ctid IN (SELECT k.ctid FROM pgque_fifo.dedup_keys k
                           WHERE k.queue = p_queue AND k.expires_at <= v_now
                             AND k.dedup_key < p_dedup_key COLLATE "C"
                           ORDER BY k.expires_at
                           LIMIT 16
                             FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN NEXT;
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

-- New functions start without grants (pgque_setup_roles_v1 gives them out).
REVOKE ALL ON FUNCTION pgque_fifo.pgque_key_seen_v1() FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_key_join_v1(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_key_policy_of_v1(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_key_tokens_v1(double precision, double precision, integer, double precision, double precision, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_fair_claim_v1(text, integer, double precision, integer, integer, text, text[], double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_group_key_v1(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_set_key_policy_v1(text, text, double precision, integer, double precision, double precision, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_key_policy_v1(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_delete_key_policy_v1(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_key_row_v1(text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_keys_v1(text, integer, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_key_info_v1(text, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_publish_v2(text, text, text, integer, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_publish_many_v2(text, text[], text[], integer, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_schedule_v2(text, text, text, integer, double precision, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_schedule_many_v2(text, text[], text[], integer, double precision, text, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION pgque_fifo.pgque_publish_tick_v2(text, text, double precision, text, text, integer, text, double precision) FROM PUBLIC;

-- Roles set up before this migration keep working without a second role setup (as in
-- migration 0010): where roles exist, the new tables and functions go to the owner of the
-- older entry points (the admin role), and each producer role (one that may call
-- pgque_publish_v1) gets the new publish entry points. A database without roles is left as it
-- is.
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
           AND p.proname IN ('pgque_claim_v2', 'pgque_publish_v1')
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    ) THEN
        RETURN;
    END IF;
    FOREACH v_rel IN ARRAY ARRAY['pgque_fifo.fair_queues'::regclass,
                                 'pgque_fifo.fair_keys'::regclass,
                                 'pgque_fifo.key_policies'::regclass] LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO %I', v_rel, v_admin);
    END LOOP;
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
                     AND p.proname = 'pgque_publish_v1' AND a.privilege_type = 'EXECUTE'
                     AND a.grantee <> p.proowner
                   ORDER BY 1 LOOP
        FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                     WHERE p.pronamespace = 'pgque_fifo'::regnamespace
                       AND p.proname IN ('pgque_publish_v2', 'pgque_publish_many_v2',
                                         'pgque_schedule_v2', 'pgque_schedule_many_v2',
                                         'pgque_publish_tick_v2')
                     ORDER BY p.oid LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn, v_role);
        END LOOP;
    END LOOP;
END
$$;

-- The superseded publish entry points (no release has been published: docs/postgres.md).
DROP FUNCTION pgque_fifo.pgque_publish_v1(text, text, text, integer, double precision);
DROP FUNCTION pgque_fifo.pgque_publish_many_v1(text, text[], text[], integer, double precision);
DROP FUNCTION pgque_fifo.pgque_schedule_v1(
    text, text, text, integer, double precision, double precision);
DROP FUNCTION pgque_fifo.pgque_schedule_many_v1(
    text, text[], text[], integer, double precision, double precision);
DROP FUNCTION pgque_fifo.pgque_publish_tick_v1(
    text, text, double precision, text, text, integer, double precision);

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (17, 'fairness keys');
