"""What a claim pays for drained rows whose publish is still in flight (docs/postgres.md).

A drain that meets a publish in flight leaves the row drained at ``until NULL``: first in claim
order, and a claim can neither adopt nor delete it until the publish ends, so every claim passes
over it. Each claim round used to rescan from the start and filter the rows already passed with
``group_id <> ALL (seen)``: K drained rows cost about K^3 comparisons (1,000 rows: 13 s).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg

from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]
Raw = psycopg.Connection[tuple[object, ...]]

K = 1000

CLAIM = (
    "SELECT group_id FROM pgque_fifo.pgque_claim_v2(%s, 1, 30, 0, NULL, 'dead_letter', NULL, NULL)"
)
#: Group rows this transaction fetched through an index so far (the claim's own reads).
FETCHED = """
SELECT idx_tup_fetch FROM pg_stat_xact_user_tables
 WHERE schemaname = 'pgque_fifo' AND relname = 'groups'
"""


def claim_reads(url: str, queue: str) -> tuple[list[tuple[object, ...]], int, float]:
    """Claim one lease in a transaction of its own, rolled back; return the leased groups,
    the group rows the claim fetched through an index and how long it took (seconds)."""
    with psycopg.connect(url) as conn:
        before = conn.execute(FETCHED).fetchone()
        started = time.monotonic()
        rows = conn.execute(CLAIM, (queue,)).fetchall()
        elapsed = time.monotonic() - started
        after = conn.execute(FETCHED).fetchone()
        conn.rollback()
    assert after is not None
    return rows, int(str(after[0])) - (int(str(before[0])) if before else 0), elapsed


def test_a_claim_behind_a_thousand_drained_rows_in_flight_reads_each_row_once(
    transport_factory: Make, raw: Raw, postgres_url: str
) -> None:
    queue = transport_factory().queue
    groups = [f"g{i:05d}" for i in range(K)]
    events = ['{"kind": "e"}'] * K
    raw.execute(
        "SELECT pgque_fifo.pgque_publish_many_v2(%s, %s, %s, 0, NULL, NULL)",
        (queue, groups, events),
    )
    leases = raw.execute(
        "SELECT group_id, message_id, token"
        " FROM pgque_fifo.pgque_claim_v2(%s, %s, 300, 0, NULL, 'dead_letter', NULL, NULL)",
        (queue, K),
    ).fetchall()
    assert len(leases) == K
    with psycopg.connect(postgres_url) as outbox:
        # One transactional publish into every group, still open while they all drain.
        outbox.execute(
            "SELECT pgque_fifo.pgque_publish_many_v2(%s, %s, %s, 0, NULL, NULL)",
            (queue, groups, events),
        )
        acked = raw.execute(
            "SELECT pgque_fifo.pgque_ack_many_v1(%s, %s, %s, %s, NULL)",
            (queue, [r[0] for r in leases], [r[1] for r in leases], [r[2] for r in leases]),
        ).fetchone()
        assert acked is not None
        assert acked[0] == [True] * K
        raw.execute(
            "SELECT pgque_fifo.pgque_publish_v2(%s, 'ready', '{}', 0, NULL, NULL)", (queue,)
        )
        for _ in range(2):  # the second claim pays the same: nothing piles up
            rows, fetched, elapsed = claim_reads(postgres_url, queue)
            print(f"\n[drained rows] K={K}: {fetched} group rows fetched, {elapsed * 1000:.0f} ms")
            assert rows == [("ready",)]  # reached behind the drained rows
            # Each drained row is read a few times (candidate scan, lease, release); the
            # rescans read about K^2 / 2.
            assert fetched < 10 * K, f"the claim fetched {fetched} rows for {K} drained rows"
            assert elapsed < 5.0, f"the claim took {elapsed:.2f} s"
        outbox.rollback()
    raw.execute("SELECT pgque_fifo.pgque_purge_v1(%s)", (queue,))
