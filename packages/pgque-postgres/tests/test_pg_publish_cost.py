"""What one publish_many of 1,000 items into 500 groups runs on the server: the batch shape of
the publish benchmark (docs/benchmarks.md).

pgque_publish_many_v2 used to lock or create each group's row with PL/pgSQL calls per group
(pgque_lock_join_v2, which calls pgque_lock_group_v3): 17.2 shared buffers per item into new
groups, 12.6 into existing ones on PostgreSQL 15. It now takes every group in a few statements
(13.8 and 10.1 there). Buffer counts move with the state of the shared tables' indexes (a
throwaway PostgreSQL 18 read from 11.8 to 14.5 into existing groups), so the test counts the
per-group calls instead, which the server reports exactly for the transaction
(``pg_stat_xact_user_functions``, with ``track_functions``): none on the one-pass path.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg

from pgque.core import Event
from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]
Raw = psycopg.Connection[tuple[object, ...]]

ITEMS = 1_000
GROUPS = 500
PUBLISH = "SELECT pgque_fifo.pgque_publish_many_v2(%s, %s, %s, 0, NULL, NULL)"
PER_GROUP = ("pgque_lock_join_v2", "pgque_lock_group_v3")
CALLS = (
    "SELECT funcname, calls FROM pg_stat_xact_user_functions"
    " WHERE schemaname = 'pgque_fifo' AND funcname = ANY(%s)"
)


def per_group_calls(raw: Raw, queue: str) -> dict[str, int]:
    """Publish one batch of ITEMS over GROUPS groups; the per-group PL/pgSQL calls it made."""
    groups = [f"g{i % GROUPS:05d}" for i in range(ITEMS)]
    events = ['{"kind": "e"}'] * ITEMS
    with raw.transaction():
        raw.execute("SET LOCAL track_functions = 'pl'")
        raw.execute(PUBLISH, (queue, groups, events))
        rows = raw.execute(CALLS, (list(PER_GROUP),)).fetchall()
    return {str(name): int(str(calls)) for name, calls in rows}


def test_publish_many_takes_its_groups_in_one_pass(transport_factory: Make, raw: Raw) -> None:
    transport = transport_factory()
    created = per_group_calls(raw, transport.queue)  # makes the 500 group rows
    existing = per_group_calls(raw, transport.queue)  # into the same groups
    assert transport.stats().messages == 2 * ITEMS
    assert created == {}, created
    assert existing == {}, existing


def test_a_batch_with_a_due_scheduled_message_takes_the_per_group_path(
    transport_factory: Make, raw: Raw
) -> None:
    """The counting can fail: a group with a scheduled message due goes through the per-group
    calls (they let due messages in first)."""
    transport = transport_factory()
    transport.publish("g00000", Event(kind="e"), delay=0.01)
    time.sleep(0.2)  # due now: the batch's publish lets it in first
    calls = per_group_calls(raw, transport.queue)
    assert calls.get("pgque_lock_join_v2", 0) >= 1, calls
