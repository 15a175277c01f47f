-- Migration 0012: the probes of the scheduled messages and the oldest-heads walk read their
-- indexes on every server, whatever the statistics say.
--
-- A table that autovacuum analyzed while it was empty (every fresh database: the scheduled
-- table stays empty until the first delayed publish) has statistics of zero rows, and the
-- planner then reads it with a sequential scan and a sort: cheapest for nothing. PL/pgSQL keeps
-- that generic plan for its session (a worker's connection), so after the table fills every
-- claim's "anything due?" probe read the whole table until the next ANALYZE invalidated the
-- plan. These functions only ever want their index ranges, so they plan with sequential scans
-- disabled (a SET clause: about half a microsecond a call). No data changes; no lock beyond
-- the functions' own catalog rows.
ALTER FUNCTION pgque_fifo.pgque_promote_v1(text, integer, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_promote_one_v1(text, text, double precision, integer)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_promote_group_v1(text, text, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_join_due_v1(text, text, double precision, integer)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_lock_join_v1(text, text, integer, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_next_due_v1(text, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_scheduled_v1(text, integer, bigint, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_cancel_v1(text, bigint, double precision)
    SET enable_seqscan = off;
ALTER FUNCTION pgque_fifo.pgque_oldest_groups_v1(text, text, integer, double precision)
    SET enable_seqscan = off;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (12, 'index plans everywhere');
