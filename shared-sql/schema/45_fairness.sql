-- Fairness keys (docs/fairness.md): a group's key, the keyed claim (weighted fair share between
-- keys, caps counted from live leases, token buckets on the server's clock), the key policies
-- and the keys listing. The rules are pgque.core.fairness's, computed here the same way: the
-- conformance suite holds this backend to the in-memory model's results.

-- A group that gets a key (a new row, or a row whose fkey changes) makes its queue keyed and
-- its key known to the claims: the queue's clock row, the default key's row (groups without a
-- key compete as the key ''), and the key's row. Inserts only when missing, never waits for a
-- claim (ON CONFLICT DO NOTHING does not lock an existing row). The trigger fires only for a
-- key other than '' (its WHEN), so a queue without keys never calls it. Its probes are index
-- probes whatever the statistics say (enable_seqscan = off: fair_keys analyzed while small
-- would otherwise be read whole for every group a keyed publish makes).
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

-- A publish into p_group_id (its locks held: pgque_lock_join_v2), before its message goes in:
-- a group without messages (new, drained or paused and empty) takes the publish's key p_fkey,
-- like its priority; a group with messages keeps its own. The row is written only when the key
-- changes, so a publish without a key into a group without one costs one index probe.
CREATE FUNCTION pgque_fifo.pgque_key_join_v1(p_queue text, p_group_id text, p_fkey text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pgque_fifo.groups g SET fkey = p_fkey
     WHERE g.queue = p_queue AND g.group_id = p_group_id AND g.fkey <> p_fkey
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = p_group_id);
END
$$;

-- The policy claims obey for p_fkey: its own (own true), else the queue's default policy, else
-- the defaults (weight 1, no cap, no rate, per 1). Exactly one row, without a sort (a claim
-- calls it with sorts off).
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

-- A key's tokens at p_now (pgque.core.fairness.refill): tokens accrue at rate / per a second up
-- to the bucket's size (burst, else max(1, ceil(rate))); NULL tokens is a full bucket; a clock
-- that went back adds nothing. NULL without a rate.
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

-- Lease the heads of up to p_n distinct groups of a keyed queue: the keys share the claims
-- first, then each key's groups are served round-robin as pgque_candidates_v2 serves a queue's
-- (COALESCE(until, 0), group_id), with priority >= p_min_priority. Lease i is labelled
-- p_holders[i]. The caller has let due scheduled messages in (pgque_promote_v1). p_now is the
-- injected clock's time, or NULL for the server's, read after the queue's clock row is locked.
-- The share is start-time fair queueing (pgque.core.fairness): the next claim goes to the key of
-- lowest (max(finish, clock), finish, key), which is the order of fair_keys_rank read from its
-- start; the clock moves to that start and the key's finish becomes start + 1 / weight. A key at
-- its cap (max_in_flight groups with a live lease: token set, until > now) or without a whole
-- token is passed over for this claim, never leased and given back. The walk is one forward pass
-- over fair_keys_rank (a cursor on (finish, fkey)): a key it passes over stays behind the
-- cursor, and a key it charges comes back further on, at its new finish tag. Per key visited:
-- its policy (one probe), its live leases under a cap (a range of groups_key, at most the cap),
-- and its next group (one descent of groups_key). A queue without policies (every key weight 1,
-- no cap, no rate) reads the next keys that have a claimable group, and one group of each, in
-- one statement, serves them while that is still the claim order, and writes their charges in
-- one statement: a claim_many(32) over 32 keys runs two statements for its keys, not 64. Sorts and sequential scans are off (as in pgque_candidates_v2): whatever the
-- statistics of small tables say, the plans are index walks; and the plans are generic (the
-- statements run once per lease: planning each anew cost more than running it).
-- Locks, in this order (docs/postgres.md): the queue's fair_queues row FOR UPDATE (so keyed
-- claims of a queue take their turns one at a time: the clock and finish tags they read are the
-- ones they write), then each group row FOR NO KEY UPDATE SKIP LOCKED as the walk reaches it,
-- then the fair_keys row of each key it charges (rows only these claims write, under the first
-- lock). Only the first may wait: the group rows are taken SKIP LOCKED and the fair_keys rows
-- are written by no one else (a purge deletes them holding the fair_queues row), so a claim
-- holding the fair_queues row waits for nothing and closes no cycle (a purge and a
-- settle_and_claim take it after group rows).
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
    v_batch_keys text[] := '{}';
    v_batch_finishes double precision[] := '{}';
    v_batch_groups text[] := '{}';
    v_batch_at integer := 1;
    v_charged_keys text[] := '{}';
    v_charged_finishes double precision[] := '{}';
    v_first_finish double precision := 'Infinity';
    v_first_key text := '';
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
            -- Every key has weight 1, no cap and no rate. The next keys in claim order that
            -- have a claimable group, and one group of each, come from one statement (keys
            -- without one are passed over inside it), and are served in that order while it
            -- is the claim order: until a key charged meanwhile comes back before the next
            -- one (its new finish tag is smaller), or a group is not leased. Then the charges
            -- are written and the walk goes on from the cursor with the next statement.
            IF v_batch_at > cardinality(v_batch_keys)
               OR (v_first_finish, v_first_key)
                  < (v_batch_finishes[v_batch_at], v_batch_keys[v_batch_at]) THEN
                IF cardinality(v_charged_keys) > 0 THEN
                    UPDATE pgque_fifo.fair_keys k
                       SET finish = v_charged_finishes[array_position(v_charged_keys, k.fkey)]
                     WHERE k.queue = p_queue AND k.fkey = ANY (v_charged_keys);
                    v_charged_keys := '{}';
                    v_charged_finishes := '{}';
                    v_first_finish := 'Infinity';
                    v_first_key := '';
                END IF;
                SELECT COALESCE(array_agg(w.fkey), '{}'), COALESCE(array_agg(w.finish), '{}'),
                       COALESCE(array_agg(w.group_id), '{}')
                  INTO v_batch_keys, v_batch_finishes, v_batch_groups
                  FROM (
                    SELECT k.fkey, k.finish, c.group_id
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
                     WHERE k.queue = p_queue
                       AND (k.finish, k.fkey) > (v_after_finish, v_after_key)
                     ORDER BY k.finish, k.fkey
                     LIMIT p_n - v_got) AS w;
                v_batch_at := 1;
                EXIT WHEN cardinality(v_batch_keys) = 0;
            END IF;
            v_key := v_batch_keys[v_batch_at];
            v_finish := v_batch_finishes[v_batch_at];
            v_group := v_batch_groups[v_batch_at];
            v_batch_at := v_batch_at + 1;
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
            ELSE
                v_batch_at := cardinality(v_batch_keys) + 1;
            END IF;
            CONTINUE;
        END IF;
        -- The charge: the clock moves to the claim's start, the key's finish tag past it.
        v_start := greatest(v_finish, v_clock);
        v_clock := v_start;
        v_after_finish := v_finish;
        v_after_key := v_key;
        IF NOT v_policies THEN
            -- Written with the batch's other charges (above, or after the loop).
            v_charged_keys := v_charged_keys || v_key;
            v_charged_finishes := v_charged_finishes || (v_start + 1.0);
            IF (v_start + 1.0, v_key) < (v_first_finish, v_first_key) THEN
                v_first_finish := v_start + 1.0;
                v_first_key := v_key;
            END IF;
            CONTINUE;
        END IF;
        UPDATE pgque_fifo.fair_keys k
           SET finish = v_start + 1.0 / v_weight,
               tokens = CASE WHEN v_rate IS NULL THEN k.tokens ELSE v_tokens - 1 END,
               -- a claim timed before the last charge (it waited for the clock row) refilled
               -- nothing: the bucket's time stays, so that interval is not refilled twice
               tokens_at = CASE WHEN v_rate IS NULL THEN k.tokens_at
                                ELSE greatest(p_now, COALESCE(k.tokens_at, p_now)) END
         WHERE k.queue = p_queue AND k.fkey = v_key;
    END LOOP;
    IF cardinality(v_charged_keys) > 0 THEN
        -- One probe of fair_keys_pkey per key (a join could read the queue's every key).
        UPDATE pgque_fifo.fair_keys k
           SET finish = v_charged_finishes[array_position(v_charged_keys, k.fkey)]
         WHERE k.queue = p_queue AND k.fkey = ANY (v_charged_keys);
    END IF;
    UPDATE pgque_fifo.fair_queues q SET clock = v_clock
     WHERE q.queue = p_queue AND q.clock <> v_clock;
END
$$;

-- The fairness key of a group as group() shows it: a drained row with messages is the group
-- its first message made, with that message's key (as its priority); NULL if no such row.
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

-- Store p_fkey's policy (NULL: the queue's default policy), replacing the one it had. The values
-- are checked by the caller (pgque.core.fairness.key_policy) and by the table's constraints.
-- A policy makes the queue keyed: its claims take the keyed path from now on.
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

-- p_fkey's own policy (NULL: the default policy): no row if it has none.
CREATE FUNCTION pgque_fifo.pgque_key_policy_v1(p_queue text, p_fkey text)
RETURNS TABLE (weight double precision, max_in_flight integer, rate double precision,
               per double precision, burst integer)
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
    SELECT p.weight, p.max_in_flight, p.rate, p.per, p.burst FROM pgque_fifo.key_policies p
     WHERE p.queue = p_queue AND p.fkey IS NOT DISTINCT FROM p_fkey
$$;

-- Drop p_fkey's own policy (NULL: the default policy); true if it had one.
CREATE FUNCTION pgque_fifo.pgque_delete_key_policy_v1(p_queue text, p_fkey text)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
BEGIN
    DELETE FROM pgque_fifo.key_policies p
     WHERE p.queue = p_queue AND p.fkey IS NOT DISTINCT FROM p_fkey;
    RETURN FOUND;
END
$$;

-- One key as keys() shows it (KeyInfo), whether or not it would be listed (listed: true when it
-- has a group with messages or a live lease, or a policy of its own). Reads the key's groups
-- (a range of groups_key) and their messages: an operator's call, not a claim's.
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

-- Up to p_limit keys with a group (messages or a live lease) or a policy of their own, after
-- p_after (from the start when NULL) in byte order of their UTF-8 (COLLATE "C"; the default key
-- '' first). The keys looked at are those the queue's claims know (fair_keys), those with a
-- policy, and '': a key that went idle is stepped over.
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

-- One key as pgque_keys_v1 lists it: no row if it would not be listed.
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
