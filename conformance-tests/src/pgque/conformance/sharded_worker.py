"""A worker over shards whose connection to one shard is cut: the settlements the other shards
applied in the same call are counted for what they did, never called lost (the worker's
ambiguous case of the sharded layer, on real servers).

A sharded backend's test module enables it with
``from pgque.conformance.sharded_worker import *`` beside a ``transport_factory`` fixture
that opens a :class:`~pgque.sharding.ShardedTransport` (``make(**options)``, ``queue=``
for a second transport of the same queue), as the PostgreSQL package's sharded tests do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from pgque.conformance.cuts import cut_settlements
from pgque.core import Event, Worker
from pgque.sharding import ShardedTransport, shard_for

__all__ = ["test_settlements_other_shards_applied_in_a_call_one_shard_lost_are_counted"]

Factory = Callable[..., Any]


def test_settlements_other_shards_applied_in_a_call_one_shard_lost_are_counted(
    transport_factory: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    """Each call carries settlements for every shard; the last shard is cut for its first
    three settling calls. The other shards' acks in those calls took effect: counted acked,
    never lost, and no "lease no longer held" warning; the cut shard's are sent again and
    land. Every message runs once."""
    producer = transport_factory()
    assert isinstance(producer, ShardedTransport)
    count = len(producer.shards)
    names = [f"g{i}" for i in range(40 * count)]
    groups = [g for k in range(count) for g in [n for n in names if shard_for(n, count) == k][:8]]
    for g in groups:
        producer.publish(g, Event(kind="k", data={"g": g}))
    shards = transport_factory(queue=producer.queue).shards
    transport = ShardedTransport(
        [*shards[:-1], cut_settlements(shards[-1], 3)], queue=producer.queue
    )
    ran: list[str] = []
    lock = threading.Lock()

    def handler(event: Event) -> None:
        with lock:
            ran.append(str(event.data["g"]))  # type: ignore[call-overload, index]

    worker = Worker(transport, handler, concurrency=4, prefetch=8, idle_backoff=(0.01, 0.05))
    with caplog.at_level(logging.WARNING, logger="pgque.worker"):
        report = worker.run(stop_when_idle=True, install_signal_handlers=False)
    assert sorted(ran) == sorted(groups)  # each ran once
    assert (report.acked, report.lost) == (len(groups), 0), report
    assert not [r for r in caplog.records if "lease no longer held" in r.getMessage()]
    assert producer.stats().messages == 0
