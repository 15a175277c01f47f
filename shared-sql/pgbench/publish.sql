-- pgbench script: publish one message into one of :groups groups.
\set g random(1, :groups)
SELECT pgque_fifo.pgque_publish_v2(:queue, :g, '{"kind":"bench"}', 0, NULL, NULL);
