"""Filtering the job history by kind or by a failure's outcome walks an index of that kind or
outcome, not every record of the queue.

20,000 records in an uncommitted transaction (rolled back after): one kind and the outcome
``acked`` nearly everywhere, 4 records of a rare kind and 4 dead letters. The plan is that of
the real function, reported by ``auto_explain`` (analyzed) for its nested statement: the rows
the history's indexes read stay near the rows returned, not the queue's 20,000.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import TupleRow

from pgque.conformance.plans import describe, explaining, nodes

RECORDS = 20_000

MAKE_RECORDS = """
INSERT INTO pgque_fifo.history (queue, message_id, group_id, kind, outcome, attempt,
                                finished_at)
SELECT %(queue)s, i, 'g' || (i %% 100), CASE WHEN i %% 5000 = 0 THEN 'rare' ELSE 'common' END,
       CASE WHEN i %% 5000 = 1 THEN 'dead_lettered' ELSE 'acked' END, 1, %(now)s - 20000 + i
  FROM generate_series(1, %(n)s) AS i
"""
HISTORY = """
SELECT message_id FROM pgque_fifo.pgque_history_v1(
    %(queue)s, NULL, %(kind)s, NULL, %(outcome)s, NULL, 50, NULL, NULL)
"""
Queue = tuple[psycopg.Connection[TupleRow], str]


@pytest.fixture
def kept_queue(postgres_url: str) -> Iterator[Queue]:
    """Yield (connection, queue) with 20,000 history records in an open transaction, rolled
    back after."""
    queue = f"t_{uuid.uuid4().hex[:24]}"
    with psycopg.connect(postgres_url) as conn:
        now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert now is not None
        conn.execute(MAKE_RECORDS, {"queue": queue, "now": now[0], "n": RECORDS})
        conn.execute("ANALYZE pgque_fifo.history")
        yield conn, queue
        conn.rollback()


def _history_rows_read(plans: list[dict[str, Any]]) -> float:
    """Rows the scans of the history's partitions read in the function's own statement."""
    listed = [p for p in plans if "FROM pgque_fifo.history h" in p["Query Text"]]
    assert len(listed) == 1, describe(plans)
    total = 0.0
    for node in nodes(listed[0]):
        if "Scan" in node["Node Type"] and str(node.get("Relation Name", "")).startswith("history"):
            loops = float(node.get("Actual Loops", 1))
            removed = float(node.get("Rows Removed by Filter", 0))
            total += (float(node["Actual Rows"]) + removed) * loops
    return total


@pytest.mark.parametrize(
    ("kind", "outcome", "expected"),
    [
        ("rare", None, [20_000, 15_000, 10_000, 5_000]),
        (None, "dead_lettered", [15_001, 10_001, 5_001, 1]),
    ],
)
def test_a_rare_kind_or_outcome_reads_its_own_records(
    kept_queue: Queue, kind: str | None, outcome: str | None, expected: list[int]
) -> None:
    conn, queue = kept_queue
    plans = explaining(conn, analyze=True)
    rows = conn.execute(HISTORY, {"queue": queue, "kind": kind, "outcome": outcome}).fetchall()
    assert [message_id for (message_id,) in rows] == expected
    assert _history_rows_read(plans) <= 10 * len(expected), describe(plans)
