-- pgque's PostgreSQL schema, fresh install of the current version: the tables.
--
-- The fresh-install script is every file of this folder (shared-sql/schema/) in file-name
-- order, run as one script in one transaction: 00_tables.sql, then the functions by concept
-- (10_publish, 20_claim_settle, 30_dead_letters, 40_groups, 50_scheduling, 60_queues,
-- 70_partition_keys), 80_roles.sql (least privilege) and last 90_version.sql (the version rows).
-- A file name is two digits, an underscore and a name; the digits give the order. Tables come
-- first because the functions of LANGUAGE sql and the view are checked against them when
-- created; PL/pgSQL bodies are checked only when called, so the function files may refer to
-- each other in any order.
--
-- This folder and the ordered files in ../migrations/ must produce the same database; a test
-- applies the migrations in order and compares the catalog with a fresh install. When you
-- change the schema, add a migration AND update the file of the concept it changes.
--
-- Everything lives in the schema pgque_fifo (not "pgque", which the PgQue SQL engine uses), one
-- set of tables for all queues, with the queue name as a column. Functions carry a version in
-- their name (pgque_claim_v2); docs/postgres.md gives the rule for a new version through a
-- rolling upgrade. Times are epoch seconds (double precision): every function takes p_now,
-- NULL meaning "the server's clock" (clock_timestamp()); a value is passed only by tests with
-- an injected clock. Requires PostgreSQL 13 or newer (gen_random_uuid() is built in from 13).

CREATE SCHEMA IF NOT EXISTS pgque_fifo;

CREATE TABLE pgque_fifo.schema_version (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per group that has messages (or is paused): the lease and the round-robin key.
--   token    the fencing token of the live lease; NULL while nobody holds the group
--   until    lease expiry while leased, park end after nack(delay), time of last service after
--            ack; NULL for a group never served. Claimable: NOT blocked AND COALESCE(until,0)<=now
--   priority fixed by the publish that created the row (0-4)
--   blocked  set when a head exhausts max_attempts under on_exhausted = 'block'
--   drained  the group drained while a publish into it was in flight (pgque_release_v1): not
--            a group until a message of its own arrives; a claim then adopts it or deletes it.
--            On a paused row: the priority is not settled, the first message's counts
--            (pgque_pause_v1)
--   paused   an operator hold (pgque_pause_v1): no claim leases the group, which is kept while
--            empty, until pgque_resume_v2
--   holder   the free-text label of the claim holding the lease (GroupInfo.lease_holder)
--   leased_id the message the live lease holds: a lease is fenced by (token, leased_id)
--   fkey     the group's fairness key ('' the default key), fixed like the priority by the
--            publish that gives the group its first message (docs/fairness.md)
-- Churn: every claim, ack and nack rewrites the row and, because until is indexed, none of those
-- updates can be HOT. The table stays small (one row per active group), so autovacuum is told
-- to visit it after a fixed number of dead rows instead of a fraction of the table
-- (scale_factor 0) and without cost-based sleeps, which keeps dead index entries from piling up
-- in front of the claim index. fillfactor 70 leaves room on each page so a new row version
-- usually lands on the page of the old one (fewer pages touched, a denser table to scan).
CREATE TABLE pgque_fifo.groups (
    queue    text COLLATE "C" NOT NULL,
    group_id text COLLATE "C" NOT NULL,
    token    text,
    until    double precision,
    priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 4),
    blocked  boolean NOT NULL DEFAULT false,
    drained  boolean NOT NULL DEFAULT false,
    paused   boolean NOT NULL DEFAULT false,
    holder   text,
    leased_id bigint,
    fkey     text COLLATE "C" NOT NULL DEFAULT '',
    leased_at double precision,
    PRIMARY KEY (queue, group_id)
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.05
);

-- The claim order (COALESCE(until, 0), group_id) within a queue, served by an index so a claim
-- never sorts the table (the seed's index on the raw column could not serve the COALESCE). One
-- partial index per priority floor: the claim function runs a static query per min_priority
-- whose literal predicate matches exactly one of them. Blocked and paused groups are left out
-- of all.
CREATE INDEX groups_ready_p0 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused;
CREATE INDEX groups_ready_p1 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused AND priority >= 1;
CREATE INDEX groups_ready_p2 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused AND priority >= 2;
CREATE INDEX groups_ready_p3 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused AND priority >= 3;
CREATE INDEX groups_ready_p4 ON pgque_fifo.groups (queue, (COALESCE(until, 0)), group_id)
    WHERE NOT blocked AND NOT paused AND priority >= 4;

-- groups(state='paused' / 'blocked') pages in group-id order: rows in these states are few,
-- so these indexes are small and a claim's or an ack's row update rarely touches them.
CREATE INDEX groups_paused ON pgque_fifo.groups (queue, group_id) WHERE paused;
CREATE INDEX groups_blocked ON pgque_fifo.groups (queue, group_id) WHERE blocked AND NOT paused;

-- The FIFO of every group. COALESCE(seq, id) orders a group (a claim leases the lowest) and
-- id is the lease's message id; an in-place redrive puts a dead letter back with its original id. Only attempts
-- and last_error are ever updated and they are not indexed, so those updates are HOT when the
-- page has room: hence fillfactor 90. priority is the one its publish asked for: it becomes
-- the group's when the message is the first of a drained group (see groups.drained).
-- last_error is the latest failure recorded by a nack (ErrorInfo JSON), or NULL. fkey is the
-- fairness key its publish asked for: it becomes the group's when the message is the first of
-- a drained group, like priority.
CREATE TABLE pgque_fifo.messages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text COLLATE "C" NOT NULL,
    group_id    text COLLATE "C" NOT NULL,
    event       text NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    enqueued_at double precision NOT NULL,
    priority    smallint NOT NULL DEFAULT 0,
    last_error  text,
    seq         bigint,
    fkey        text COLLATE "C" NOT NULL DEFAULT ''
) WITH (fillfactor = 90);

-- A group's FIFO order is COALESCE(seq, id). seq is NULL but for a scheduled message that
-- joined its group when due (pgque_join_due_v1): it keeps its (older) id and takes its
-- position from the id sequence then, behind every message already in the group.
CREATE INDEX messages_head ON pgque_fifo.messages (queue, group_id, (COALESCE(seq, id)));

-- Messages in enqueue-time order within a queue: the walk of pgque_oldest_groups_v1.
CREATE INDEX messages_enqueued ON pgque_fifo.messages (queue, enqueued_at, id);

-- error: the failure given to dead_letter, else the message's last_error (ErrorInfo JSON).
-- seq: the message's position in its group (messages.seq), which an in-place redrive restores.
-- fkey: its group's fairness key, which a redrive gives back to a group it makes anew.
CREATE TABLE pgque_fifo.dead_letters (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text COLLATE "C" NOT NULL,
    group_id    text COLLATE "C" NOT NULL,
    message_id  bigint NOT NULL,
    event       text NOT NULL,
    priority    smallint NOT NULL,
    attempts    integer NOT NULL,
    reason      text NOT NULL,
    enqueued_at double precision NOT NULL,
    failed_at   double precision NOT NULL,
    error       text,
    seq         bigint,
    fkey        text COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX dead_letters_queue ON pgque_fifo.dead_letters (queue, id);

-- Messages published with a delay (issue 17), until they are due. id is drawn from the
-- messages' id sequence when the message is scheduled, so ids stay one monotonic sequence and
-- the message keeps its id when it joins its group. enqueued_at is the publish time; at due_at
-- the message joins its group's tail (pgque_join_due_v1) with enqueued_at = due_at. Rows are
-- only inserted and deleted. scheduled_due serves "what is due" (a claim's probe: one index
-- descent when nothing is due, however many wait) and next_due_at; scheduled_group serves the
-- due messages of one group (the publish path's probe).
CREATE TABLE pgque_fifo.scheduled (
    id          bigint PRIMARY KEY,
    queue       text COLLATE "C" NOT NULL,
    group_id    text COLLATE "C" NOT NULL,
    event       text NOT NULL,
    priority    smallint NOT NULL CHECK (priority BETWEEN 0 AND 4),
    due_at      double precision NOT NULL,
    enqueued_at double precision NOT NULL,
    fkey        text COLLATE "C" NOT NULL DEFAULT ''
);

-- fkey: the fairness key its publish asked for (a group it makes takes it).
CREATE INDEX scheduled_due ON pgque_fifo.scheduled (queue, due_at, id);
CREATE INDEX scheduled_group ON pgque_fifo.scheduled (queue, group_id, due_at, id);

-- The last tick of each periodic schedule entry published into a queue (pgque_publish_tick_v2).
CREATE TABLE pgque_fifo.ticks (
    queue text COLLATE "C" NOT NULL,
    entry text COLLATE "C" NOT NULL,
    tick  double precision NOT NULL,
    PRIMARY KEY (queue, entry)
);

-- The partition-key layer (pgque.partition): the producer dedup window and the persisted slot
-- count of ordered (Tier B) queues; its functions are in 70_partition_keys.sql.

-- One row per (queue, dedup key) published within its window. message_id is the message the
-- first publish appended; expires_at ends the window (epoch seconds). Expired rows are taken
-- over by the next publish of the same key, and reaped in small batches by every deduplicated
-- publish of the queue (pgque_dedup_reap_v1), so the table holds about one window of keys.
CREATE TABLE pgque_fifo.dedup_keys (
    queue      text COLLATE "C" NOT NULL,
    dedup_key  text COLLATE "C" NOT NULL,
    message_id bigint NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);

CREATE INDEX dedup_keys_expiry ON pgque_fifo.dedup_keys (queue, expires_at);

-- The slot count N of a queue whose keys are hashed to N slots; fixed by the first publisher
-- or consumer, so every producer routes a key to the same slot.
CREATE TABLE pgque_fifo.partition_slots (
    queue      text COLLATE "C" PRIMARY KEY,
    slots      integer NOT NULL CHECK (slots BETWEEN 1 AND 256),
    created_at double precision NOT NULL
);

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

-- Job history (docs/history.md; the functions are in 55_history.sql). One row per queue whose
-- history is on: its retention (keep_s seconds and/or max_rows records; at least one is set).
CREATE TABLE pgque_fifo.history_queues (
    queue    text COLLATE "C" PRIMARY KEY,
    keep_s   double precision CHECK (keep_s > 0),
    max_rows bigint CHECK (max_rows >= 1),
    CHECK (keep_s IS NOT NULL OR max_rows IS NOT NULL)
);

-- What happened to each message of those queues, partitioned by day of finished_at so that
-- pruning empties whole partitions (pgque_history_maintain_v1), never a big DELETE. The default
-- partition takes a record no day partition holds yet (maintenance creates them ahead). id
-- orders a queue's records (newer is larger: the paging cursor). fkey '' is the default key.
CREATE SEQUENCE pgque_fifo.history_ids;
CREATE TABLE pgque_fifo.history (
    id           bigint NOT NULL DEFAULT nextval('pgque_fifo.history_ids'),
    queue        text COLLATE "C" NOT NULL,
    message_id   bigint NOT NULL,
    group_id     text COLLATE "C" NOT NULL,
    kind         text NOT NULL,
    fkey         text COLLATE "C" NOT NULL DEFAULT '',
    outcome      text NOT NULL,
    attempt      integer NOT NULL,
    published_at double precision,
    started_at   double precision,
    finished_at  double precision NOT NULL,
    worker       text,
    error        text,
    reason       text
) PARTITION BY RANGE (finished_at);
-- The id sequence belongs to the table: it goes with it and changes owner with it.
ALTER SEQUENCE pgque_fifo.history_ids OWNED BY pgque_fifo.history.id;
CREATE TABLE pgque_fifo.history_default PARTITION OF pgque_fifo.history DEFAULT;
-- A queue's records newest first; a message's story; a group's records.
CREATE INDEX history_queue ON pgque_fifo.history (queue, id);
CREATE INDEX history_message ON pgque_fifo.history (queue, message_id, id);
CREATE INDEX history_group ON pgque_fifo.history (queue, group_id, id);
-- A kind's records; the records that did not end in an ack (the index holds only those, the
-- few: an acked record's insert pays no entry in it). Without them a filter on a rare kind or
-- on the failures walks every record of the queue (seconds at 10,000,000 records).
CREATE INDEX history_kind ON pgque_fifo.history (queue, kind, id);
CREATE INDEX history_unacked ON pgque_fifo.history (queue, outcome, id) WHERE outcome <> 'acked';

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
