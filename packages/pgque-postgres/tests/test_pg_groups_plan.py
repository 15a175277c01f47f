"""A groups() page is a range of an index, never a scan of the queue's groups.

20,000 groups in an uncommitted transaction (rolled back after, so nothing is left behind):
mostly ready, a few leased, parked, paused and blocked. The plans are those of the real page
function, reported by ``auto_explain`` for its nested statements; every state's page and the
unfiltered page, first and middle, must use an index and no Seq Scan. (The latency at a
million groups is measured by ``benchmarks/groups_page.py``, not here.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import TupleRow

from pgque.conformance.plans import describe, explaining, index_scans, seq_scans
from pgque.core import Event

GROUPS = 20_000

MAKE_GROUPS = """
INSERT INTO pgque_fifo.groups (queue, group_id, priority, until, token, paused, blocked)
SELECT %(queue)s, 'g' || lpad(i::text, 6, '0'), i %% 5,
       CASE WHEN i %% 400 IN (1, 2) THEN %(now)s + 600 ELSE %(now)s - i END,
       CASE WHEN i %% 400 = 1 THEN md5(i::text) END,
       i %% 1000 = 3, i %% 1000 = 4
  FROM generate_series(1, %(n)s) AS i
"""
MAKE_MESSAGES = """
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
SELECT %(queue)s, 'g' || lpad(i::text, 6, '0'), %(event)s, %(now)s
  FROM generate_series(1, %(n)s) AS i
"""
PAGE = "SELECT group_id, state FROM pgque_fifo.pgque_groups_v1(%s, %s, 100, %s, NULL)"
BigQueue = tuple[psycopg.Connection[TupleRow], str]


@pytest.fixture
def big_queue(postgres_url: str) -> Iterator[BigQueue]:
    """Yield (connection, queue) with 20,000 groups in an open transaction, rolled back after."""
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


@pytest.mark.parametrize("state", [None, "ready", "leased", "parked", "paused", "blocked"])
@pytest.mark.parametrize("after", ["", "g010000"], ids=["first-page", "middle-page"])
def test_a_groups_page_is_an_index_range(
    big_queue: BigQueue, state: str | None, after: str
) -> None:
    conn, queue = big_queue
    plans = explaining(conn)
    rows = conn.execute(PAGE, (queue, state, after or None)).fetchall()
    assert rows, "the page is empty: the data does not exercise this state"
    assert all(row_state == (state or row_state) for _g, row_state in rows)
    assert [g for g, _s in rows] == sorted(g for g, _s in rows)
    pages = [p for p in plans if "g.group_id > p_after" in p["Query Text"]]
    assert len(pages) == 1, describe(plans)
    (plan,) = pages
    assert seq_scans(plan) == [], describe(plan)
    assert index_scans(plan), describe(plan)
    if state in ("leased", "parked"):
        # The claim index's future range: the leases out and the parks, then a sort.
        assert "groups_ready_p0" in index_scans(plan), describe(plan)
    if state == "paused":
        assert "groups_paused" in index_scans(plan), describe(plan)
    if state == "blocked":
        assert "groups_blocked" in index_scans(plan), describe(plan)
