"""What one publish_many of 1,000 items into 500 groups reads on the server: the batch shape
of the publish benchmark (docs/benchmarks.md). Buffer counts do not depend on the machine's
load, so they are checked rather than times.

pgque_publish_many_v2 used to lock or create each group's row with a PL/pgSQL call per group
(a probe of scheduled messages, the queue's lock again, the row, the key join): 17.2 buffers
per item into new groups, 12.6 into existing ones. It now takes every group in a few
statements (13.8 and 10.1; the rest is the messages' heap and three indexes). Those are
PostgreSQL 15's counts; the throwaway PostgreSQL 18 of a fresh machine read 11.8 into existing
groups, so the bound into existing groups (12.2) sits between the new body's counts and the old
body's 12.6.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]
Raw = psycopg.Connection[tuple[object, ...]]

ITEMS = 1_000
GROUPS = 500
PUBLISH = (
    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"
    " SELECT pgque_fifo.pgque_publish_many_v2(%s, %s, %s, 0, NULL, NULL)"
)


def buffers_per_item(raw: Raw, queue: str) -> float:
    """Publish one batch of ITEMS over GROUPS groups; the shared buffers it read, per item."""
    groups = [f"g{i % GROUPS:05d}" for i in range(ITEMS)]
    events = ['{"kind": "e"}'] * ITEMS
    row = raw.execute(PUBLISH, (queue, groups, events)).fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]  # type: ignore[index]
    return float(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]) / ITEMS


def test_publish_many_takes_its_groups_in_one_pass(transport_factory: Make, raw: Raw) -> None:
    transport = transport_factory()
    created = buffers_per_item(raw, transport.queue)  # makes the 500 group rows
    existing = buffers_per_item(raw, transport.queue)  # into the same groups
    print(
        f"\n[publish_many cost] buffers per item: {created:.1f} new groups, {existing:.1f} existing"
    )
    assert transport.stats().messages == 2 * ITEMS
    assert existing < 12.2, existing
    assert created < 15.5, created
