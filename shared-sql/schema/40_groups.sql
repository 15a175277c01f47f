-- Groups as first-class objects: the operator's holds and releases (pause, resume, retry now,
-- unblock) and the reads of one group, a page of groups, and the groups with the oldest heads.

-- Hold a group: no claim leases it until pgque_resume_v2 (a lease already out finishes
-- normally). True if it was not paused. A group that does not exist is created paused,
-- empty, with priority 0 and never served. Locks one group row, FOR NO KEY UPDATE: it waits
-- for a claim or a settle holding the row (that claim's lease was granted before the pause),
-- and a claim after the pause commits skips the row (it is in no claim index, and a claim that
-- read the row before sees the pause when it locks it). Publishes are not waited for: they
-- hold the row FOR KEY SHARE.
-- On a paused row, drained means "the priority is not settled": an empty paused group takes
-- the priority of the first message that arrives ("a publish into a group with no messages
-- sets its priority"), and the first message's priority is what group() shows and what
-- resume keeps. A drained row that is not paused is no group yet, or one whose first
-- publish committed after the drain: pausing settles it (the priority of its first message),
-- or creates the group afresh when it has no message (a publish in flight then sets the
-- priority when it commits).
CREATE FUNCTION pgque_fifo.pgque_pause_v1(p_queue text, p_group_id text)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_paused boolean;
    v_drained boolean;
    v_head_priority smallint;
BEGIN
    LOOP
        SELECT g.paused, g.drained INTO v_paused, v_drained FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR NO KEY UPDATE;
        IF FOUND THEN
            IF v_paused THEN
                RETURN false;
            END IF;
            IF NOT v_drained THEN
                UPDATE pgque_fifo.groups g SET paused = true
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
                RETURN true;
            END IF;
            SELECT m.priority INTO v_head_priority FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND m.group_id = p_group_id
             ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
            IF FOUND THEN
                UPDATE pgque_fifo.groups g
                   SET paused = true, drained = false, priority = v_head_priority
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
            ELSE
                UPDATE pgque_fifo.groups g
                   SET paused = true, priority = 0, until = NULL, token = NULL,
                       leased_id = NULL, holder = NULL, blocked = false
                 WHERE g.queue = p_queue AND g.group_id = p_group_id;
            END IF;
            RETURN true;
        END IF;
        INSERT INTO pgque_fifo.groups (queue, group_id, priority, paused, drained)
        VALUES (p_queue, p_group_id, 0, true, true)
        ON CONFLICT (queue, group_id) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        -- A publish created the row meanwhile (or a drain deleted it): look again.
    END LOOP;
END
$$;

-- Lift a pause at p_now; false if the group is not paused (or does not exist). Due scheduled
-- messages are let in first (pgque_promote_group_v1), so a group whose only message fell due
-- while it was paused is not empty and keeps its place. A resumed group with messages settles
-- its priority (see pgque_pause_v1) and is claimable again; one without is removed, as a drain
-- removes it (marked drained when a publish in flight holds the row).
CREATE FUNCTION pgque_fifo.pgque_resume_v2(p_queue text, p_group_id text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_paused boolean;
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    -- Due scheduled messages join first (as group() lets them in): a group whose only
    -- message is one that fell due while it was paused is not empty, and keeps its place.
    PERFORM pgque_fifo.pgque_promote_group_v1(p_queue, p_group_id, v_now);
    SELECT g.paused INTO v_paused FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT v_paused THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                    WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
        PERFORM 1 FROM pgque_fifo.groups g
         WHERE g.queue = p_queue AND g.group_id = p_group_id
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            UPDATE pgque_fifo.groups g
               SET paused = false, token = NULL, leased_id = NULL, holder = NULL, until = NULL,
                   blocked = false, priority = 4, drained = true
             WHERE g.queue = p_queue AND g.group_id = p_group_id;
            RETURN true;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pgque_fifo.messages m
                        WHERE m.queue = p_queue AND m.group_id = p_group_id) THEN
            DELETE FROM pgque_fifo.groups g WHERE g.queue = p_queue AND g.group_id = p_group_id;
            RETURN true;
        END IF;
    END IF;
    UPDATE pgque_fifo.groups g
       SET paused = false, drained = false,
           priority = CASE WHEN g.drained
                           THEN (SELECT m.priority FROM pgque_fifo.messages m
                                  WHERE m.queue = p_queue AND m.group_id = p_group_id
                                  ORDER BY COALESCE(m.seq, m.id) LIMIT 1)
                           ELSE g.priority END
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
END
$$;

-- End the retry delay a group waits out (pgque_nack's delay): its head is claimable at p_now,
-- its attempt count and last error kept; a paused group stays paused (the delay is over when
-- it resumes). False if the group waits for no retry: absent, drained, blocked, leased, or
-- claimable already. Locks one group row, FOR NO KEY UPDATE (waits for a claim or settle
-- holding it: a lease granted before this call finishes normally).
CREATE FUNCTION pgque_fifo.pgque_retry_now_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_row record;
BEGIN
    SELECT g.token, g.until, g.blocked, g.drained, g.paused INTO v_row FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR v_row.drained OR v_row.blocked OR v_row.token IS NOT NULL
       OR v_row.until IS NULL OR v_row.until <= v_now THEN
        RETURN false;
    END IF;
    UPDATE pgque_fifo.groups g SET until = v_now
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    IF NOT v_row.paused THEN
        PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    END IF;
    RETURN true;
END
$$;

-- Release a group blocked by on_exhausted = 'block': retry its head with a fresh attempt count,
-- or (p_drop_head) dead-letter the head (keeping its last error). False when the group is not
-- blocked. A paused group stays paused. With p_head, the group is released only if p_head is
-- still its head (the message the operator looked at); false otherwise, nothing changed. Locks
-- one group row, FOR NO KEY UPDATE, then (dropping the head) what pgque_bury_v2 locks.
CREATE FUNCTION pgque_fifo.pgque_unblock_v2(
    p_queue text, p_group_id text, p_drop_head boolean, p_head bigint, p_now double precision)
RETURNS boolean LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_blocked boolean;
    v_head bigint;
BEGIN
    SELECT g.blocked INTO v_blocked FROM pgque_fifo.groups g
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT v_blocked THEN
        RETURN false;
    END IF;
    SELECT m.id INTO v_head FROM pgque_fifo.messages m
     WHERE m.queue = p_queue AND m.group_id = p_group_id
     ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
    IF p_head IS NOT NULL AND v_head IS DISTINCT FROM p_head THEN
        RETURN false;
    END IF;
    UPDATE pgque_fifo.groups g SET blocked = false
     WHERE g.queue = p_queue AND g.group_id = p_group_id;
    IF p_drop_head THEN
        IF v_head IS NOT NULL THEN
            PERFORM pgque_fifo.pgque_history_add_v1(
                p_queue, p_group_id, v_head, 'dead_lettered', false, NULL,
                'dropped by operator (unblock)', v_now);
            PERFORM pgque_fifo.pgque_bury_v2(p_queue, p_group_id, v_head,
                                             'dropped by operator (unblock)', NULL, v_now);
        END IF;
        PERFORM pgque_fifo.pgque_release_v1(p_queue, p_group_id, v_now);
    ELSE
        UPDATE pgque_fifo.messages m SET attempts = 0 WHERE m.id = v_head;
        UPDATE pgque_fifo.groups g
           SET token = NULL, leased_id = NULL, holder = NULL, until = v_now
         WHERE g.queue = p_queue AND g.group_id = p_group_id;
    END IF;
    PERFORM pg_notify(pgque_fifo.pgque_channel_v1(p_queue), '');
    RETURN true;
END
$$;

-- One group as an operator sees it at p_now, or no row when the queue has no such group (a
-- drained row without a message is none; a paused one always is). State by precedence:
-- paused, blocked, leased (a token out and unexpired), parked (no token, until in the
-- future), ready. depth counts the group's messages (its index entries: the cost grows with
-- the depth); the head is the lowest id.
CREATE FUNCTION pgque_fifo.pgque_group_info_v1(
    p_queue text, p_group_id text, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE sql STABLE AS $$
    SELECT g.group_id,
           CASE WHEN g.paused THEN 'paused'
                WHEN g.blocked THEN 'blocked'
                WHEN g.token IS NOT NULL AND g.until > p_now THEN 'leased'
                WHEN g.token IS NULL AND g.until > p_now THEN 'parked'
                ELSE 'ready' END,
           (SELECT count(*) FROM pgque_fifo.messages m
             WHERE m.queue = g.queue AND m.group_id = g.group_id),
           CASE WHEN g.drained AND h.id IS NOT NULL THEN h.priority ELSE g.priority END,
           h.id, h.enqueued_at, COALESCE(h.attempts, 0),
           CASE WHEN g.token IS NOT NULL THEN g.until END,
           CASE WHEN g.token IS NOT NULL THEN g.holder END,
           CASE WHEN g.token IS NULL AND g.until > p_now THEN g.until END,
           h.last_error
      FROM pgque_fifo.groups g
      LEFT JOIN LATERAL (
          SELECT m.id, m.enqueued_at, m.attempts, m.priority, m.last_error
            FROM pgque_fifo.messages m
           WHERE m.queue = g.queue AND m.group_id = g.group_id
           ORDER BY COALESCE(m.seq, m.id)
           LIMIT 1) AS h ON true
     WHERE g.queue = p_queue AND g.group_id = p_group_id
       AND (NOT g.drained OR g.paused OR h.id IS NOT NULL)
$$;

CREATE FUNCTION pgque_fifo.pgque_group_v1(p_queue text, p_group_id text, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
BEGIN
    -- As if the group's scheduled messages due by now had joined: they join now.
    PERFORM pgque_fifo.pgque_promote_group_v1(p_queue, p_group_id, v_now);
    RETURN QUERY SELECT * FROM pgque_fifo.pgque_group_info_v1(p_queue, p_group_id, v_now);
END
$$;

-- The group ids of one groups() page: up to p_limit groups after p_after in byte order, in
-- p_state when given. Every page is a range of an index, never a scan of the queue: the
-- primary key in group-id order (every group; ready groups), groups_paused, groups_blocked; a
-- page of leased or parked groups reads the claim index's future range (COALESCE(until, 0) >
-- now: the leases out and the parks, usually few) and sorts it. The planner has no statistics
-- on COALESCE(until, 0) (those of a partial index are not used) and would guess that a third
-- of the groups lie in the future range, making the range look dearer than a scan; spelt as
-- a bounded range (> now AND < 'Infinity') it gets the default estimate of a range instead
-- (half a percent), so the index range is chosen. The function is planned afresh for each call
-- (plan_cache_mode, set on the function), with the call's own now. A ready page walks the
-- primary key and skips the groups in other states (cheap while most groups are ready, which
-- is a queue's usual state; a queue whose groups are nearly all parked pays for the skipped
-- ones). A drained row is tested for a message with a scalar subquery, probed only for drained
-- rows (an EXISTS here was planned as a hash of every message of the table).
CREATE FUNCTION pgque_fifo.pgque_group_page_v1(
    p_queue text, p_state text, p_limit integer, p_after text, p_now double precision)
RETURNS text[] LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    IF p_state IS NULL THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.group_id > p_after COLLATE "C"
               AND (NOT g.drained OR g.paused
                    OR (SELECT true FROM pgque_fifo.messages m
                         WHERE m.queue = g.queue AND m.group_id = g.group_id LIMIT 1))
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'paused' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.paused AND g.group_id > p_after COLLATE "C"
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'blocked' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND g.blocked AND NOT g.paused
               AND g.group_id > p_after COLLATE "C"
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'leased' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) > p_now AND COALESCE(g.until, 0) < 'Infinity'
               AND g.token IS NOT NULL
               AND g.group_id > p_after COLLATE "C"
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'parked' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) > p_now AND COALESCE(g.until, 0) < 'Infinity'
               AND g.token IS NULL
               AND g.group_id > p_after COLLATE "C"
             ORDER BY g.group_id
             LIMIT p_limit);
    ELSIF p_state = 'ready' THEN
        RETURN ARRAY(
            SELECT g.group_id FROM pgque_fifo.groups g
             WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
               AND COALESCE(g.until, 0) <= p_now
               AND g.group_id > p_after COLLATE "C"
               AND (NOT g.drained
                    OR (SELECT true FROM pgque_fifo.messages m
                         WHERE m.queue = g.queue AND m.group_id = g.group_id LIMIT 1))
             ORDER BY g.group_id
             LIMIT p_limit);
    END IF;
    RAISE EXCEPTION 'pgque: unknown group state %', p_state;
END
$$;

-- Up to p_limit groups after p_after (all when NULL) in byte order of group id, only those in
-- p_state when given (ready, leased, parked, blocked, paused); as pgque_group_v1 shows them.
-- The page's ids are taken first into a variable: as an argument of unnest() in the query the
-- page function would also run while the query is planned (to estimate its rows).
CREATE FUNCTION pgque_fifo.pgque_groups_v1(
    p_queue text, p_state text, p_limit integer, p_after text, p_now double precision)
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
    -- As if every scheduled message due by now had joined: they join now, in batches, never
    -- waiting (pgque_promote_v1); nothing is written in a read-only transaction (a hot
    -- standby), where a due message shows once a writer moved it in.
    IF current_setting('transaction_read_only') <> 'on' THEN
        LOOP
            EXIT WHEN pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now) = 0;
        END LOOP;
    END IF;
    v_ids := pgque_fifo.pgque_group_page_v1(p_queue, p_state, p_limit, COALESCE(p_after, ''),
                                            v_now);
    RETURN QUERY
        SELECT i.group_id, i.state, i.depth, i.priority, i.head_message_id, i.head_enqueued_at,
               i.head_attempts, i.lease_expires_at, i.lease_holder, i.resume_at, i.last_error
          FROM unnest(v_ids) WITH ORDINALITY AS u(id, n)
         CROSS JOIN LATERAL pgque_fifo.pgque_group_info_v1(p_queue, u.id, v_now) AS i
         ORDER BY u.n;
END
$$;

-- The groups of p_queue that hold a message, the oldest head first: ordered by the head's
-- enqueue time, then by group id in byte order, at most p_limit of them, only those in
-- p_state if it is not NULL (the state names of pgque_group_info_v1). Due scheduled messages
-- join first, as in pgque_groups_v1.
--
-- A state an operator or a lease holds (paused, blocked, leased, parked) is read from the
-- groups in it (an index range each: groups_paused, groups_blocked, or groups_ready_p0 past
-- now), each with its head (one probe of messages_head), then sorted. Otherwise
-- messages_enqueued is walked from the oldest message, skipping the groups already seen: the
-- first message of a group not seen yet leads to that group's head (one probe), and the walk
-- stops once p_limit heads older than the next unseen message are known (every group not seen
-- has its head at or after it). It reads the messages older than the last head it returns:
-- few, unless a group holds a long backlog older than the others' heads (docs/postgres.md).
-- Planned at each call with its own now (the future range of leased and parked groups), and
-- with index plans whatever the statistics say (enable_seqscan = off, see 50_scheduling.sql).
CREATE FUNCTION pgque_fifo.pgque_oldest_groups_v1(
    p_queue text, p_state text, p_limit integer, p_now double precision)
RETURNS TABLE (group_id text, state text, depth bigint, priority integer,
               head_message_id bigint, head_enqueued_at double precision,
               head_attempts integer, lease_expires_at double precision, lease_holder text,
               resume_at double precision, last_error text)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp SET plan_cache_mode = force_custom_plan SET enable_seqscan = off AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_at double precision := '-infinity';
    v_id bigint := 0;
    v_next_at double precision;
    v_next_id bigint;
    v_gid text;
    v_head double precision;
    v_seen text[] := '{}';
    v_gids text[] := '{}';
    v_heads double precision[] := '{}';
    v_ready boolean;
BEGIN
    IF current_setting('transaction_read_only') <> 'on' THEN
        LOOP
            EXIT WHEN pgque_fifo.pgque_promote_v1(p_queue, 1000, v_now) = 0;
        END LOOP;
    END IF;
    -- A held state: its groups from their index, each with its head (one probe), below.
    -- (The future range of leased and parked groups is bounded, as in pgque_group_page_v1:
    -- the planner has no statistics for the expression of a partial index.)
    IF p_state = 'paused' THEN
        v_gids := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND g.paused);
    ELSIF p_state = 'blocked' THEN
        v_gids := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND g.blocked AND NOT g.paused);
    ELSIF p_state = 'leased' THEN
        v_gids := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
                           AND COALESCE(g.until, 0) > v_now
                           AND COALESCE(g.until, 0) < 'Infinity'
                           AND g.token IS NOT NULL);
    ELSIF p_state = 'parked' THEN
        v_gids := ARRAY(SELECT g.group_id FROM pgque_fifo.groups g
                         WHERE g.queue = p_queue AND NOT g.blocked AND NOT g.paused
                           AND COALESCE(g.until, 0) > v_now
                           AND COALESCE(g.until, 0) < 'Infinity'
                           AND g.token IS NULL);
    ELSE
        LOOP
            SELECT m.enqueued_at, m.id, m.group_id INTO v_next_at, v_next_id, v_gid
              FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND (m.enqueued_at, m.id) > (v_at, v_id)
               AND m.group_id <> ALL (v_seen)
             ORDER BY m.enqueued_at, m.id
             LIMIT 1;
            EXIT WHEN NOT FOUND;
            EXIT WHEN (SELECT count(*) FROM unnest(v_heads) AS k(at) WHERE k.at < v_next_at)
                      >= p_limit;
            v_at := v_next_at;
            v_id := v_next_id;
            v_seen := v_seen || v_gid;
            IF p_state = 'ready' THEN
                SELECT NOT g.paused AND NOT g.blocked AND COALESCE(g.until, 0) <= v_now
                  INTO v_ready
                  FROM pgque_fifo.groups g
                 WHERE g.queue = p_queue AND g.group_id = v_gid;
                CONTINUE WHEN v_ready IS NOT TRUE;
            END IF;
            SELECT m.enqueued_at INTO v_head FROM pgque_fifo.messages m
             WHERE m.queue = p_queue AND m.group_id = v_gid
             ORDER BY COALESCE(m.seq, m.id) LIMIT 1;
            v_gids := v_gids || v_gid;
            v_heads := v_heads || v_head;
        END LOOP;
    END IF;
    IF p_state IN ('paused', 'blocked', 'leased', 'parked') THEN
        -- A group without a message (a paused empty one) has no head: it drops out here.
        SELECT COALESCE(array_agg(c.gid), '{}'), COALESCE(array_agg(h.enqueued_at), '{}')
          INTO v_gids, v_heads
          FROM unnest(v_gids) AS c(gid)
         CROSS JOIN LATERAL (SELECT m.enqueued_at FROM pgque_fifo.messages m
                              WHERE m.queue = p_queue AND m.group_id = c.gid
                              ORDER BY COALESCE(m.seq, m.id) LIMIT 1) AS h;
    END IF;
    RETURN QUERY
        SELECT i.group_id, i.state, i.depth, i.priority, i.head_message_id, i.head_enqueued_at,
               i.head_attempts, i.lease_expires_at, i.lease_holder, i.resume_at, i.last_error
          FROM (SELECT c.gid, c.at FROM unnest(v_gids, v_heads) AS c(gid, at)
                 ORDER BY c.at, c.gid COLLATE "C" LIMIT p_limit) AS c
         CROSS JOIN LATERAL pgque_fifo.pgque_group_info_v1(p_queue, c.gid, v_now) AS i
         ORDER BY c.at, c.gid COLLATE "C";
END
$$;
