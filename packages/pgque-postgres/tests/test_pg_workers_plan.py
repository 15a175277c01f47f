"""Listing the workers reads the queue's live leases through index ranges, never a scan of its
groups.

20,000 groups in an uncommitted transaction (rolled back after, so nothing is left behind):
mostly ready, a few leased (some of them held by the listed worker, some paused or blocked),
parked, paused and blocked. The plan is that of the real function, reported by
``auto_explain`` for its nested statement: no Seq Scan on the groups, and each of the three
lease ranges an index of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import TupleRow

from pgque.conformance.plans import describe, explaining, index_scans, seq_scans
from pgque.core.live_workers import ALIVE_MULTIPLE

GROUPS = 20_000

MAKE_GROUPS = """
INSERT INTO pgque_fifo.groups (queue, group_id, priority, until, token, holder, leased_id,
                               paused, blocked)
SELECT %(queue)s, 'g' || lpad(i::text, 6, '0'), i %% 5,
       CASE WHEN i %% 400 IN (1, 2) THEN %(now)s + 600 ELSE %(now)s - i END,
       CASE WHEN i %% 400 = 1 THEN md5(i::text) END,
       CASE WHEN i %% 400 = 1 THEN 'web-' || (i %% 3) || ':7:0' END,
       CASE WHEN i %% 400 = 1 THEN i END,
       i %% 1000 IN (3, 401), i %% 1000 IN (4, 801)
  FROM generate_series(1, %(n)s) AS i
"""
HEARTBEAT = """
SELECT pgque_fifo.pgque_heartbeat_v1(%s, 'w0', 'web-0:7', 'web-0', 7, 'v', 4, 10.0, '[]',
                                     3600.0, NULL)
"""
LIST = "SELECT worker_id, group_id FROM pgque_fifo.pgque_workers_v1(%s, true, %s, NULL)"
BigQueue = tuple[psycopg.Connection[TupleRow], str]


@pytest.fixture
def big_queue(postgres_url: str) -> Iterator[BigQueue]:
    """Yield (connection, queue) with 20,000 groups and one worker in an open transaction,
    rolled back after."""
    queue = f"t_{uuid.uuid4().hex[:24]}"
    with psycopg.connect(postgres_url) as conn:
        now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert now is not None
        conn.execute(MAKE_GROUPS, {"queue": queue, "now": now[0], "n": GROUPS})
        conn.execute(HEARTBEAT, (queue,))
        conn.execute("ANALYZE pgque_fifo.groups")
        yield conn, queue
        conn.rollback()


def test_the_workers_leases_are_index_ranges(big_queue: BigQueue) -> None:
    conn, queue = big_queue
    plans = explaining(conn)
    rows = conn.execute(LIST, (queue, ALIVE_MULTIPLE)).fetchall()
    # Every 400th group is leased, a third of them by web-0 (i % 3 == 0).
    expected = sorted(f"g{i:06d}" for i in range(1, GROUPS + 1) if i % 400 == 1 and i % 3 == 0)
    assert sorted(group for _w, group in rows) == expected
    listed = [p for p in plans if "pgque_fifo.workers" in p["Query Text"]]
    assert len(listed) == 1, describe(plans)
    (plan,) = listed
    # The queue's worker rows are few: only the groups must not be scanned.
    assert "groups" not in seq_scans(plan), describe(plan)
    used = index_scans(plan)
    for index in ("groups_ready_p0", "groups_paused", "groups_blocked"):
        assert index in used, describe(plan)
