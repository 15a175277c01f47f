-- Claim and settle: lease the heads of claimable groups, and end a lease (ack, nack, release,
-- dead_letter), extend it, or settle finished leases and claim the next ones in one call. Every
-- settlement is fenced: it acts only while (token, message id) is the group's live lease.

-- Up to p_limit claimable groups in claim order after the cursor (p_after_until,
-- p_after_group), locked FOR NO KEY UPDATE, with each row's claim-order key (the next cursor);
-- rows another claim holds are skipped, so concurrent claimers take different groups. One
-- static query per priority floor: its literal predicate matches one partial index, which
-- serves the range (COALESCE(until, 0) <= now), the cursor (a row comparison on the index's
-- columns) and the order, so there is no sort. Paused groups are in no claim index: a pause
-- that committed before the row is locked is seen by the lock's recheck of the predicate.
-- A claim's later rounds start after the rows it already passed instead of rescanning them
-- (with a list of rows to skip, K drained rows with a publish in flight cost about K^3
-- comparisons). p_leased (at most the claim's n rows) keeps a group the claim leased with
-- visibility 0 from coming round again.
-- SKIP LOCKED does not cover everything: when the row version this statement's snapshot sees
-- carries a KEY SHARE lock of a publish still in flight and an update committed after the
-- snapshot, PostgreSQL takes the lock and then locks the newer versions too ("while locking
-- updated version ... of tuple"), waiting for whoever holds them whatever the wait policy. A
-- claim holds the rows it locked earlier (this round and before), and an ack_many, a purge or
-- another claim holding that newer version may be waiting for one of them: a deadlock (found
-- by the mixed stress run). So the scan runs under a short lock_timeout (set on the function,
-- below 1 s, PostgreSQL's default deadlock_timeout) inside a block that gives the round up:
-- a claim waits at most that long, rarely, and never closes a cycle.
-- And without sorts: with the statistics of a table that other queues fill, a small queue's
-- scan could be planned as a read of all its rows and a sort, every round (K drained rows
-- whose publish is in flight then cost K^2 row reads per claim). Sorting off, the plan left is
-- the index walk.
CREATE FUNCTION pgque_fifo.pgque_candidates_v2(
    p_queue text, p_limit integer, p_min_priority integer, p_now double precision,
    p_after_until double precision, p_after_group text, p_leased text[])
RETURNS TABLE (group_id text, sort_until double precision) LANGUAGE plpgsql
SET lock_timeout = '20ms' SET enable_sort = off AS $$
#variable_conflict use_column
DECLARE
    v_ids text[];
BEGIN
  BEGIN
    IF p_min_priority <= 0 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 1 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused AND g.priority >= 1
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 2 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused AND g.priority >= 2
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSIF p_min_priority = 3 THEN
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused AND g.priority >= 3
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    ELSE
        v_ids := ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused AND g.priority >= 4
               AND COALESCE(g.until, 0) <= p_now
               AND (COALESCE(g.until, 0), g.group_id) > (p_after_until, p_after_group COLLATE "C")
               AND g.group_id <> ALL (p_leased)
             ORDER BY COALESCE(g.until, 0), g.group_id
             LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED);
    END IF;
  EXCEPTION WHEN lock_not_available THEN
    -- Following an update chain outwaited this function's lock_timeout (see above): give up
    -- this round; its row locks go with the block, and the claim returns what it has. (The
    -- rows are returned only after the block, so none escapes it unlocked.)
    RETURN;
  END;
  -- The rows are locked: their claim-order keys cannot change under us.
  RETURN QUERY
      SELECT u.id, (SELECT COALESCE(g.until, 0) FROM pgque_fifo.groups g
                     WHERE g.queue = p_queue AND g.group_id = u.id)
        FROM unnest(v_ids) WITH ORDINALITY AS u(id, n);
END
$$;

-- Lease the head (the lowest message id) of one group the caller has locked. A drained row
-- (see pgque_release_v1) first becomes the new group its first message made: that message's
-- priority and fairness key, never served; if that priority is below p_min_priority nothing is leased. An
-- exhausted head (attempts >= max_attempts) is dead-lettered ("max_attempts (N) exhausted",
-- keeping its last error) and the next one tried, or the group is blocked. A paused group is
-- never leased (the candidates leave it out; this is the last word). The lease remembers its
-- message (leased_id) and the claim's holder label. Returns no row when nothing was leased.
CREATE FUNCTION pgque_fifo.pgque_lease_group_v3(
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
            PERFORM pgque_fifo.pgque_history_add_v1(
                p_queue, p_group_id, v_id, 'exhausted', false, NULL,
                format('max_attempts (%s) exhausted', p_max_attempts), p_now);
            PERFORM pgque_fifo.pgque_bury_v2(
                p_queue, p_group_id, v_id, format('max_attempts (%s) exhausted', p_max_attempts),
                NULL, p_now);
            CONTINUE;
        END IF;
        UPDATE pgque_fifo.messages m SET attempts = m.attempts + 1 WHERE m.id = v_id;
        v_token := replace(gen_random_uuid()::text, '-', '');
        UPDATE pgque_fifo.groups g
           SET token = v_token, leased_id = v_id, holder = p_holder,
               until = p_now + p_visibility, leased_at = p_now
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

-- Lease the heads of up to p_n distinct groups in claim order: smallest (COALESCE(until, 0),
-- group_id), group ids compared by code point. One round trip; each group at most once. A queue
-- that uses fairness keys (a row in fair_queues) is served by pgque_fair_claim_v1 instead.
-- p_holder labels the leases (GroupInfo.lease_holder).
CREATE FUNCTION pgque_fifo.pgque_claim_v2(
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

-- Fencing: lock the group row and tell whether (token, message id) is still the live lease,
-- even past its expiry, until another claim takes the group. The lease names its message
-- (leased_id): a lower id that a redrive put back meanwhile does not change which message a
-- lease holds.
CREATE FUNCTION pgque_fifo.pgque_held_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id AND g.token = p_token
       AND g.leased_id = p_message_id
       FOR NO KEY UPDATE;
    RETURN FOUND;
END
$$;

-- Free a group whose head was just settled (ack, dead_letter, operator drop) or that was found
-- empty by a claim: drop the row if the group has drained, else clear the lease and set until
-- to now (the round-robin key: served now, so it queues behind groups served earlier).
-- A paused group is kept while empty (until resume): its row stays, marked drained, which on
-- a paused row means "the first message to arrive sets the priority" (see pgque_pause_v1).
-- A drained group whose row a publish in flight holds (FOR KEY SHARE) cannot be dropped without
-- waiting for that publish, and claims and acks never wait on a publisher. The row is marked
-- drained instead: the group is gone (stats do not count it) and the publish, if it commits,
-- makes a new one, as the model has it: never served (until NULL) and with the priority of its
-- first message (messages.priority; the row says 4 meanwhile so every claim floor reaches it).
-- The first claim to reach the row adopts that priority (pgque_lease_group_v3) or, once
-- nobody holds it and it is still empty (the publish rolled back), deletes it.
CREATE FUNCTION pgque_fifo.pgque_release_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                    WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
        -- The group's messages that fell due meanwhile join first (its locks are held): the
        -- group had a message at their due time, so it goes on with its priority, as in the
        -- model, instead of being dropped and made anew by them.
        IF pgque_fifo.pgque_join_due_v1(p_queue, p_group_id, p_now, 1000) > 0 THEN
            UPDATE pgque_fifo.groups g
               SET token = NULL, leased_id = NULL, holder = NULL, until = p_now
             WHERE g.queue = p_queue AND g.group_id = p_group_id;
            RETURN;
        END IF;
        UPDATE pgque_fifo.groups g
           SET token = NULL, leased_id = NULL, holder = NULL, until = p_now, blocked = false,
               drained = true
         WHERE g.queue = p_queue AND g.group_id = p_group_id AND g.paused;
        IF FOUND THEN
            RETURN;
        END IF;
        -- SKIP LOCKED: never wait, so no deadlock. Once we hold the row, later publishes wait
        -- for us; look again with a fresh snapshot for one that committed in between.
        PERFORM 1 FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            UPDATE pgque_fifo.groups g
               SET token = NULL, leased_id = NULL, holder = NULL, until = NULL, blocked = false,
                   priority = 4, drained = true
             WHERE g.queue = p_queue AND g.group_id = p_group_id AND NOT g.drained;
            RETURN;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
            DELETE FROM pgque_fifo.groups g WHERE g.queue = p_queue AND g.group_id = p_group_id;
            RETURN;
        END IF;
    END IF;
    -- A drained row keeps its "never served" place until a claim adopts it.
    UPDATE pgque_fifo.groups g
       SET token = NULL, leased_id = NULL, holder = NULL,
           until = CASE WHEN g.drained AND NOT g.paused THEN NULL ELSE p_now END
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
END
$$;

-- An ErrorInfo's JSON with "at" filled in by p_now when the caller left it null (the server's
-- clock judges, as for every other time). NULL stays NULL.
CREATE FUNCTION pgque_fifo.pgque_error_at_v1(p_error text, p_now double precision)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_error IS NULL THEN NULL
        WHEN jsonb_typeof(p_error::jsonb -> 'at') = 'number' THEN p_error
        ELSE jsonb_set(p_error::jsonb, '{at}', to_jsonb(p_now))::text
    END
$$;

CREATE FUNCTION pgque_fifo.pgque_ack_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    PERFORM pgque_fifo.pgque_history_add_v1(
        p_queue, p_group_id, p_message_id, 'acked', true, NULL, NULL, v_now);
    DELETE FROM pgque_fifo.messages m WHERE m.id = p_message_id;
    PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    RETURN true;
END
$$;

-- Ack several leases; results in input order. Groups are visited in code-point order (input
-- order within a group) so two batches lock rows in the same order and cannot deadlock.
CREATE FUNCTION pgque_fifo.pgque_ack_many_v1(
    p_queue text, p_group_ids text[], p_message_ids bigint[], p_tokens text[],
    p_now double precision)
RETURNS boolean[] LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_out boolean[] := '{}';
    v_row record;
BEGIN
    FOR v_row IN
        SELECT u.g, u.m, u.t, u.n
          FROM unnest(p_group_ids, p_message_ids, p_tokens) WITH ORDINALITY AS u(g, m, t, n)
         ORDER BY u.g COLLATE "C", u.n
    LOOP
        v_out[v_row.n] := pgque_fifo.pgque_ack_v1(p_queue, v_row.g, v_row.m, v_row.t, v_now);
    END LOOP;
    RETURN v_out;
END
$$;

-- Give the message back; with p_delay > 0 park the group until then. p_error (ErrorInfo JSON,
-- "at" filled in by the server when null) becomes the message's last_error; NULL keeps it.
CREATE FUNCTION pgque_fifo.pgque_nack_v2(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_delay double precision,
    p_error text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_error text := pgque_fifo.pgque_error_at_v1(p_error, v_now);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    IF v_error IS NOT NULL THEN
        UPDATE pgque_fifo.messages m SET last_error = v_error WHERE m.id = p_message_id;
    END IF;
    PERFORM pgque_fifo.pgque_history_add_v1(
        p_queue, p_group_id, p_message_id, 'nacked', true, v_error, NULL, v_now);
    UPDATE pgque_fifo.groups g
       SET token = NULL, leased_id = NULL, holder = NULL, until = v_now + p_delay
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    IF p_delay <= 0 THEN
        -- Claimable again now: wake an idle worker.
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN true;
END
$$;

-- Give the message back for immediate redelivery without counting this delivery: its attempts
-- go back down by one, the lease ends and the group is claimable at once (like a nack without
-- delay: until = now, behind the groups served earlier). last_error is kept.
CREATE FUNCTION pgque_fifo.pgque_release_lease_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    PERFORM pgque_fifo.pgque_history_add_v1(
        p_queue, p_group_id, p_message_id, 'released', true, NULL, NULL, v_now);
    UPDATE pgque_fifo.messages m SET attempts = greatest(m.attempts - 1, 0)
     WHERE m.id = p_message_id;
    UPDATE pgque_fifo.groups g
       SET token = NULL, leased_id = NULL, holder = NULL, until = v_now
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
END
$$;

-- Renew a held lease; returns the new expiry, or NULL when the lease is not held.
CREATE FUNCTION pgque_fifo.pgque_extend_v1(
    p_queue text, p_group_id text, p_message_id bigint, p_token text,
    p_visibility double precision, p_now double precision)
RETURNS double precision LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_until double precision;
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN NULL;
    END IF;
    v_until := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision)
               + p_visibility;
    UPDATE pgque_fifo.groups g SET until = v_until
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    RETURN v_until;
END
$$;

-- Move the leased message to the dead letters with p_reason and p_error (else its
-- last_error); the group continues.
CREATE FUNCTION pgque_fifo.pgque_dead_letter_v2(
    p_queue text, p_group_id text, p_message_id bigint, p_token text, p_reason text,
    p_error text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_error text := pgque_fifo.pgque_error_at_v1(p_error, v_now);
BEGIN
    IF NOT pgque_fifo.pgque_held_v1(p_queue, p_group_id, p_message_id, p_token) THEN
        RETURN false;
    END IF;
    PERFORM pgque_fifo.pgque_history_add_v1(
        p_queue, p_group_id, p_message_id, 'dead_lettered', true, v_error, p_reason, v_now);
    PERFORM pgque_fifo.pgque_bury_v2(p_queue, p_group_id, p_message_id, p_reason, v_error, v_now);
    PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    RETURN true;
END
$$;

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
