"""The claim is served by an index: no sort over the groups table, and fast at 100,000 groups.

The 100,000 groups are made with two set-based INSERTs inside a transaction that is rolled
back, so the test leaves nothing behind. The plans are those of the real claim function,
reported by ``auto_explain`` for its nested statements (custom and generic plans alike).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import TupleRow

from pgque.conformance.plans import describe, explain, explaining, nodes
from pgque.core import Event

GROUPS = 100_000

MAKE_GROUPS = """
INSERT INTO pgque_fifo.groups (queue, group_id, priority, until)
SELECT %(queue)s, 'g' || lpad(i::text, 6, '0'), i %% 5,
       CASE WHEN i %% 3 = 0 THEN NULL ELSE %(now)s - i END
  FROM generate_series(1, %(n)s) AS i
"""
MAKE_MESSAGES = """
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
SELECT %(queue)s, 'g' || lpad(i::text, 6, '0'), %(event)s, %(now)s
  FROM generate_series(1, %(n)s) AS i
"""
CLAIM = (
    "SELECT * FROM pgque_fifo.pgque_claim_v2(%s, 1, 30, %s, NULL, 'dead_letter', NULL,"
    " NULL::float8)"
)
#: The fixture's value: a connection inside the uncommitted transaction, and the queue name.
BigQueue = tuple[psycopg.Connection[TupleRow], str]


@pytest.fixture
def big_queue(postgres_url: str) -> Iterator[BigQueue]:
    """Yield (connection, queue) with 100,000 groups in an open transaction, rolled back after."""
    queue = f"t_{uuid.uuid4().hex[:24]}"
    with psycopg.connect(postgres_url) as conn:
        now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert now is not None
        params = {"queue": queue, "now": now[0], "n": GROUPS, "event": Event(kind="x").to_json()}
        conn.execute(MAKE_GROUPS, params)
        conn.execute(MAKE_MESSAGES, params)
        conn.execute("ANALYZE pgque_fifo.groups")
        conn.execute("ANALYZE pgque_fifo.messages")
        yield conn, queue
        conn.rollback()


def test_claim_plan_has_no_sort_and_uses_the_priority_index(big_queue: BigQueue) -> None:
    conn, queue = big_queue
    plans = explaining(conn)
    # Ten claims per floor, five with custom plans and five with the generic plan PL/pgSQL
    # may switch to: both must be index scans.
    for min_priority in range(5):
        plans.clear()
        for i in range(10):
            mode = "force_custom_plan" if i < 5 else "force_generic_plan"
            conn.execute(f"SET plan_cache_mode = {mode}")
            rows = conn.execute(CLAIM, (queue, min_priority)).fetchall()
            assert len(rows) == 1
            assert rows[0][4] >= min_priority
        # The candidates query (the lease reads the locked group's row and head as well).
        candidates = [
            p for p in plans if "ORDER BY COALESCE(g.until, 0), g.group_id" in p["Query Text"]
        ]
        assert len(candidates) == 10, describe(plans)
        for plan in candidates:
            assert "Sort" not in [n["Node Type"] for n in nodes(plan)], describe(plan)
            scans = [(n["Node Type"], n.get("Index Name")) for n in nodes(plan)]
            assert ("Index Scan", f"groups_ready_p{min_priority}") in scans, describe(plan)


def test_one_claim_takes_under_5_ms_at_100k_groups(big_queue: BigQueue) -> None:
    conn, queue = big_queue
    timings = []
    for _ in range(30):
        start = time.perf_counter()
        conn.execute(CLAIM, (queue, 0)).fetchall()
        timings.append(time.perf_counter() - start)
    median = statistics.median(timings)
    print(f"claim at {GROUPS} groups: median {median * 1000:.2f} ms")
    assert median < 0.005


def test_the_seeds_index_cannot_serve_the_claim_order(postgres_url: str) -> None:
    """The seed's index on lock_expiry alone leaves a Sort of the whole table in every claim."""
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "CREATE TEMP TABLE seed_groups (group_id text PRIMARY KEY, locked_by text,"
            " lock_expiry double precision, priority int NOT NULL DEFAULT 0)"
        )
        conn.execute("CREATE INDEX seed_groups_claimable ON seed_groups (lock_expiry)")
        conn.execute(
            "INSERT INTO seed_groups (group_id, lock_expiry, priority)"
            " SELECT 'g' || i, CASE WHEN i % 3 = 0 THEN NULL ELSE i END, i % 5"
            " FROM generate_series(1, 100000) AS i"
        )
        conn.execute("ANALYZE seed_groups")
        plan = explain(
            conn,
            "SELECT group_id FROM seed_groups"
            " WHERE (locked_by IS NULL OR lock_expiry < 1e12) AND priority >= 0"
            " ORDER BY COALESCE(lock_expiry, 0) ASC, group_id"
            " FOR UPDATE SKIP LOCKED LIMIT 1",
        )
        conn.rollback()
    assert "Sort" in [n["Node Type"] for n in nodes(plan)], describe(plan)
