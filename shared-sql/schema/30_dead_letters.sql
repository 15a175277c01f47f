-- Dead letters: move a message to the dead-letter store, list and delete dead letters, and
-- redrive them back into their groups (in place, or at the tails).

-- Move one message to the dead letters, recording its group's priority and fairness key and
-- the error: the one given, else the message's last recorded one.
CREATE FUNCTION pgque_fifo.pgque_bury_v2(
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

-- Dead letters with id > p_after (all when NULL), oldest first, with their recorded error.
CREATE FUNCTION pgque_fifo.pgque_dead_letters_v2(p_queue text, p_limit integer, p_after bigint)
RETURNS TABLE (id bigint, group_id text, message_id bigint, event text, priority integer,
               attempts integer, reason text, failed_at double precision, error text)
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
    SELECT d.id, d.group_id, d.message_id, d.event, d.priority, d.attempts, d.reason,
           d.failed_at, d.error
      FROM pgque_fifo.dead_letters d
     WHERE d.queue = p_queue AND d.id > COALESCE(p_after, 0)
     ORDER BY d.id
     LIMIT p_limit
$$;

-- Delete the dead letters with these ids (locked in id order); returns how many existed.
CREATE FUNCTION pgque_fifo.pgque_delete_dead_letters_v1(p_queue text, p_ids bigint[])
RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_count integer;
BEGIN
    DELETE FROM pgque_fifo.dead_letters d
     WHERE d.id IN (SELECT k.id FROM pgque_fifo.dead_letters k
                     WHERE k.queue = p_queue AND k.id = ANY (p_ids)
                     ORDER BY k.id
                       FOR UPDATE);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- Return dead letters (all of the queue when p_ids is NULL) to their groups; returns how many;
-- unknown ids are ignored. In place (pgque_redrive_in_place_v1) each message goes back under
-- its original id and position, and then takes its dead letter's error as its last error (the
-- group keeps its history), and with p_retry_now the retry delay its group waits out ends (as
-- pgque_retry_now_v1). Not in place (pgque_redrive_at_tail_v1) they are published again at
-- their groups' tails. Locks what those lock (group rows in group id order, then dead letters
-- in id order); the rows updated after them are the ones they locked or inserted.
CREATE FUNCTION pgque_fifo.pgque_redrive_v3(
    p_queue text, p_ids bigint[], p_in_place boolean, p_retry_now boolean,
    p_now double precision)
RETURNS integer LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pgque_fifo, pg_temp AS $$
DECLARE
    v_now double precision := COALESCE(p_now, extract(epoch FROM clock_timestamp())::double precision);
    v_messages bigint[];
    v_errors text[];
    v_groups text[];
    v_count integer;
BEGIN
    IF NOT p_in_place THEN
        RETURN pgque_fifo.pgque_redrive_at_tail_v1(p_queue, p_ids, v_now);
    END IF;
    SELECT array_agg(d.message_id ORDER BY d.id), array_agg(d.error ORDER BY d.id),
           array_agg(DISTINCT d.group_id)
      INTO v_messages, v_errors, v_groups
      FROM pgque_fifo.dead_letters d
     WHERE d.queue = p_queue AND (p_ids IS NULL OR d.id = ANY (p_ids));
    v_count := pgque_fifo.pgque_redrive_in_place_v1(p_queue, p_ids, v_now);
    IF v_count = 0 THEN
        RETURN 0;
    END IF;
    UPDATE pgque_fifo.messages m SET last_error = e.error
      FROM unnest(v_messages, v_errors) AS e(message_id, error)
     WHERE m.id = e.message_id AND m.queue = p_queue AND e.error IS NOT NULL
       AND m.last_error IS NULL AND m.attempts = 0
       AND NOT EXISTS (SELECT 1 FROM pgque_fifo.dead_letters d
                        WHERE d.queue = p_queue AND d.message_id = e.message_id);
    IF p_retry_now THEN
        UPDATE pgque_fifo.groups g SET until = v_now
         WHERE g.queue = p_queue AND g.group_id = ANY (v_groups) AND NOT g.drained
           AND NOT g.blocked AND g.token IS NULL AND g.until > v_now;
    END IF;
    RETURN v_count;
END
$$;

-- Return dead letters (all of the queue when p_ids is NULL) to their groups in place; returns
-- how many (pgque_redrive_v3 in place). Each message goes back with its original id and
-- position (a claim always delivers a group's lowest position, so it comes before every later
-- message not yet delivered; a lease out keeps its own message, see pgque_held_v1), with
-- attempts 0 and no last error, enqueued at the redrive's time (as the reference model has
-- it: head_enqueued_at and oldest_age_s count from the redrive). A group that does not exist is
-- created with the priority of its first dead letter (dead-letter id order); an existing one
-- keeps its priority, pause and block. Locks, in the documented order:
--   1. per group in group-id byte order: the queue's lock (shared), the group's advisory lock
--      and its row FOR KEY SHARE (pgque_lock_group_v3, creating a missing row), as a publish
--      does: publishes into the group wait for the redrive, or the redrive for them;
--   2. then the same rows FOR NO KEY UPDATE, in byte order, once every advisory lock is held
--      (a caller's transaction that published into one of the groups and then settled a
--      lease of another could otherwise wait on a row the redrive holds while the redrive
--      waits on its publish);
--   3. then the dead letters in id order (one another redrive or a purge took meanwhile is
--      skipped);
--   4. the rows are held, so nobody changes a group's messages while the redrive looks at them:
--      a drained row is settled (see pgque_pause_v1) before any message goes in, then the
--      messages are inserted and the dead letters deleted; a group created for nothing (its
--      dead letters went elsewhere) is dropped again.
CREATE FUNCTION pgque_fifo.pgque_redrive_in_place_v1(
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
        IF pgque_fifo.pgque_lock_group_v3(
               p_queue, v_row.group_id, COALESCE(v_first, v_row.priority), '') THEN
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
    ),
    gone AS (
        DELETE FROM pgque_fifo.dead_letters d
         USING src s, inserted i
         WHERE d.id = s.id AND i.id = s.message_id
        RETURNING d.id, d.message_id, d.group_id, d.event, d.fkey, d.attempts, d.enqueued_at,
                  d.error, d.reason
    ),
    recorded AS (
        INSERT INTO pgque_fifo.history
            (queue, message_id, group_id, kind, fkey, outcome, attempt, published_at,
             finished_at, error, reason)
        SELECT p_queue, g.message_id, g.group_id, COALESCE(g.event::json ->> 'kind', ''),
               g.fkey, 'redriven', g.attempts, g.enqueued_at, v_now, g.error, g.reason
          FROM gone g
         WHERE EXISTS (SELECT 1 FROM pgque_fifo.history_queues q WHERE q.queue = p_queue)
         ORDER BY g.id
    )
    SELECT count(*) INTO v_count FROM gone;
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

-- Publish dead letters (all of the queue when p_ids is NULL) again at their groups' tails, in
-- dead-letter id order, with the priority they were recorded with; returns how many
-- (pgque_redrive_v3 not in place).
-- Locks in the documented order: each group's advisory lock and row in group-id byte order
-- (as publish_many does), then the dead-letter rows in id order. A dead letter that another
-- redrive or a purge took meanwhile is gone by then and skipped: a group left with nothing to
-- receive is dropped again if it is empty (never a paused one: a pause keeps an empty group),
-- and a new group whose first dead letter went elsewhere takes the priority of the first one
-- it does receive.
CREATE FUNCTION pgque_fifo.pgque_redrive_at_tail_v1(
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
        PERFORM pgque_fifo.pgque_lock_join_v2(
            p_queue, v_row.group_id, v_row.priority, '', v_now);
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
        RETURNING d.id, d.group_id, d.event, d.priority, d.fkey, d.message_id, d.attempts,
                  d.enqueued_at, d.error, d.reason
    ),
    recorded AS (
        INSERT INTO pgque_fifo.history
            (queue, message_id, group_id, kind, fkey, outcome, attempt, published_at,
             finished_at, error, reason)
        SELECT p_queue, t.message_id, t.group_id, COALESCE(t.event::json ->> 'kind', ''),
               t.fkey, 'redriven', t.attempts, t.enqueued_at, v_now, t.error, t.reason
          FROM taken t
         WHERE EXISTS (SELECT 1 FROM pgque_fifo.history_queues q WHERE q.queue = p_queue)
         ORDER BY t.id
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
