-- Migration 0002: churn tuning of the hot tables and the operator view.

-- groups: every claim, ack and nack rewrites a row and, because until is indexed, none of those
-- updates is HOT. The table stays small, so autovacuum visits it after a fixed number of dead
-- rows (scale_factor 0) and without cost-based sleeps; fillfactor 70 keeps room on each page so
-- a new row version usually stays on the page of the old one.
ALTER TABLE pgque_fifo.groups SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.05
);

-- messages: only attempts is updated and it is not indexed, so room on the page makes that
-- update HOT.
ALTER TABLE pgque_fifo.messages SET (fillfactor = 90);

-- One row per queue, by the server's clock: what `pgque stats` shows, for dashboards and
-- alerts (SELECT * FROM pgque_fifo.queue_stats).
CREATE VIEW pgque_fifo.queue_stats AS
SELECT q.queue, s.groups, s.messages, s.in_flight, s.parked, s.blocked, s.dead_letters,
       s.oldest_age_s, to_timestamp(s.next_resume_at) AS next_resume_at
  FROM (SELECT g.queue FROM pgque_fifo.groups g
        UNION
        SELECT d.queue FROM pgque_fifo.dead_letters d) AS q
 CROSS JOIN LATERAL pgque_fifo.pgque_stats_v1(q.queue, NULL) AS s;

INSERT INTO pgque_fifo.schema_version (version, name) VALUES (2, 'churn tuning and operator view');
