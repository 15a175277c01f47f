"""A settlement that may have taken effect is resolved, not reported lost: over shards, a
combined call whose other shard is cut counts the answering shard's acks (they stand); a
settlement sent again after a lost reply and answered False is checked with the store.

Forced, not hoped for: the cut shard refuses the calls the test says, nothing else varies."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from _worker_helpers import KINDS, adds_up, make_transport, make_worker, run

from pgque.conformance.cuts import cut_settlements, lost_settle_reply
from pgque.core import Event, InMemoryTransport, MemoryStore
from pgque.sharding import AsyncShardedTransport, ShardedTransport, shard_for

pytestmark = [pytest.mark.timeout(30), pytest.mark.parametrize("kind", KINDS)]


def test_acks_a_healthy_shard_applied_in_a_call_the_other_shard_lost_are_counted(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each call carries settlements of both shards; shard 1 is cut for its first three
    settling calls. Shard 0's acks in those calls took effect: counted acked, never lost, and
    no "lease no longer held" warning; shard 1's are sent again and land."""
    store = MemoryStore()
    groups = [g for g in (f"g{i}" for i in range(200)) if shard_for(g, 2) == 0][:12]
    groups += [g for g in (f"g{i}" for i in range(200)) if shard_for(g, 2) == 1][:12]
    inner = [make_transport(kind, store, queue=f"amb_s{k}") for k in range(2)]
    cut = cut_settlements(inner[1], 3)
    if kind == "sync":
        transport: Any = ShardedTransport([inner[0], cut], queue="amb")
    else:
        transport = AsyncShardedTransport([inner[0], cut], queue="amb")
    producer = ShardedTransport(
        [InMemoryTransport(store=store, queue=f"amb_s{k}") for k in range(2)], queue="amb"
    )
    for g in groups:
        producer.publish(g, Event(kind="k", data={"g": g}))
    ran: list[str] = []
    lock = threading.Lock()

    def handler(event: Event) -> None:
        with lock:
            ran.append(str(event.data["g"]))  # type: ignore[call-overload, index]

    worker = make_worker(kind, transport, handler, concurrency=4, prefetch=8)
    with caplog.at_level(logging.WARNING, logger="pgque.worker"):
        report = run(worker)
    assert sorted(ran) == sorted(groups)  # each ran once
    assert report.lost == 0, report
    assert report.acked == len(groups), report
    assert adds_up(report), report
    assert not [r for r in caplog.records if "lease no longer held" in r.getMessage()]
    assert producer.stats().messages == 0


def test_an_ack_whose_reply_was_lost_is_confirmed_with_the_store_not_called_lost(
    kind: str,
) -> None:
    """The ack went through but its reply was lost; sent again it answers False (the lease is
    gone: the ack took it). The worker asks the store: the message left its group, so the ack
    took effect: counted acked, not lost."""
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    queue.publish("g", Event(kind="k"))
    inner = make_transport(kind, store)
    transport = lost_settle_reply(inner)
    worker = make_worker(kind, transport, lambda event: None)
    report = run(worker)
    assert transport.lost
    assert (report.acked, report.lost) == (1, 0), report
    assert adds_up(report), report
    assert queue.stats().messages == 0
