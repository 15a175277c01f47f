-- Migration 0022: a keyed claim without policies reads its keys in batches.
--
-- pgque_fair_claim_v1 ran, per lease, one statement to find the next key in claim order and
-- its next group, and one to charge the key. Without policies (every key weight 1, no cap, no
-- rate) it now reads the next keys that have a claimable group, one group each, in one walk of
-- fair_keys_rank, serves them in that order while it stays the claim order (a key charged
-- meanwhile that comes back first, or a group that leases nothing, ends the batch, and the
-- walk goes on from its cursor), and writes the batch's charges in one statement. The leases
-- and their order are the same as before; a claim_many(32) over 32 keys runs two statements
-- for its keys instead of 64. Keys with policies are served as before.
--   Changed body: pgque_fair_claim_v1.
-- No table changes.

CREATE OR REPLACE FUNCTION pgque_fifo.pgque_fair_claim_v1(
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

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (22, 'keyed claims in batches');
