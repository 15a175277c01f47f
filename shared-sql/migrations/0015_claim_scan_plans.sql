-- Migration 0015: a claim's candidate scan is planned as an index walk, whatever the statistics.

-- A claim's candidate scan walks a ready index in claim order from its cursor. With the
-- statistics of a table that other queues fill, a small queue's scan could be planned as a
-- read of all its rows and a sort, every round: K drained rows whose publish is in flight then
-- cost K^2 row reads per claim (1,000 rows: 1,006,004 reads). Sorting off, the plan left is
-- the index walk.
ALTER FUNCTION pgque_fifo.pgque_candidates_v2(
    text, integer, integer, double precision, double precision, text, text[])
    SET enable_sort = off;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (15, 'claim scan plans');
