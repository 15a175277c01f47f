"""What a handler's result does to its message, on both runners."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from _worker_helpers import KINDS, Recorder, proxy_for, run_handler

from pgque.core import (
    Event,
    InMemoryTransport,
    Lease,
    MemoryStore,
    Reject,
    Retry,
    RetryPolicy,
)

pytestmark = [pytest.mark.timeout(30), pytest.mark.parametrize("kind", KINDS)]


def publish(store: MemoryStore, groups: int, per_group: int, **options: Any) -> InMemoryTransport:
    transport = InMemoryTransport(store=store, **options)
    for i in range(per_group):
        for g in range(groups):
            transport.publish(f"g{g}", Event(kind="k", data={"g": g, "i": i}))
    return transport


def test_returning_acks_and_the_handler_gets_the_event_alone(kind: str) -> None:
    store = MemoryStore()
    queue = publish(store, groups=3, per_group=2)
    seen: list[Any] = []

    def handler(event: Event) -> None:
        seen.append(event.data)

    report = run_handler(kind, store, handler)
    assert sorted(d["g"] * 10 + d["i"] for d in seen) == [0, 1, 10, 11, 20, 21]
    assert (report.claimed, report.acked, report.settled) == (6, 6, 6)
    assert queue.stats().messages == 0


def test_two_parameter_handlers_get_the_lease(kind: str) -> None:
    store = MemoryStore()
    publish(store, groups=1, per_group=1)
    leases: list[Lease] = []

    def handler(event: Event, lease: Lease) -> None:
        assert lease.event == event
        leases.append(lease)

    run_handler(kind, store, handler)
    assert [lease.attempt for lease in leases] == [1]


def test_raising_nacks_with_the_policy_delay_by_attempt(kind: str) -> None:
    store = MemoryStore()
    queue = publish(store, groups=1, per_group=2)
    recorder = Recorder()
    attempts: list[tuple[int, int]] = []

    def handler(event: Event, lease: Lease) -> None:
        attempts.append((event.data["i"], lease.attempt))  # type: ignore[arg-type, call-overload, index]
        if event.data["i"] == 0 and lease.attempt < 3:  # type: ignore[call-overload, index]
            raise ValueError("not yet")

    policy = RetryPolicy(base=0.02, factor=2.0, max_delay=1.0, jitter=0.0)
    report = run_handler(
        kind,
        store,
        handler,
        retry=policy,
        wrap=lambda t: proxy_for(kind)(t, recorder=recorder),
    )
    assert attempts == [(0, 1), (0, 2), (0, 3), (1, 1)]  # the group waited: FIFO kept
    assert [delay for _lease, delay in recorder.args("nack")] == [0.02, 0.04]
    assert (report.retried, report.acked) == (2, 2)
    assert queue.stats().messages == 0


def test_retry_asks_for_its_delay(kind: str) -> None:
    store = MemoryStore()
    publish(store, groups=1, per_group=1)
    recorder = Recorder()

    def handler(event: Event, lease: Lease) -> None:
        if lease.attempt == 1:
            raise Retry(0.03)

    started = time.monotonic()
    report = run_handler(kind, store, handler, wrap=lambda t: proxy_for(kind)(t, recorder=recorder))
    assert time.monotonic() - started >= 0.03
    assert [delay for _lease, delay in recorder.args("nack")] == [0.03]
    assert (report.retried, report.acked) == (1, 1)


def test_reject_dead_letters_at_once_and_the_group_goes_on(kind: str) -> None:
    store = MemoryStore()
    queue = publish(store, groups=1, per_group=3)
    handled: list[int] = []

    def handler(event: Event) -> None:
        handled.append(event.data["i"])  # type: ignore[arg-type, call-overload, index]
        if event.data["i"] == 1:  # type: ignore[call-overload, index]
            raise Reject("malformed order")

    report = run_handler(kind, store, handler)
    assert handled == [0, 1, 2]
    assert (report.acked, report.dead_lettered, report.retried) == (2, 1, 0)
    [dead] = queue.dead_letters()
    assert (dead.reason, dead.event.data, dead.attempts) == ("malformed order", {"g": 0, "i": 1}, 1)


def test_max_attempts_then_the_transport_dead_letters(kind: str) -> None:
    store = MemoryStore()
    queue = publish(store, groups=1, per_group=2, max_attempts=2)

    def handler(event: Event) -> None:
        if event.data["i"] == 0:  # type: ignore[call-overload, index]
            raise RuntimeError("always")

    report = run_handler(
        kind,
        store,
        handler,
        retry=RetryPolicy(base=0.0, jitter=0.0),
        transport_options={"max_attempts": 2},
    )
    # The last failed attempt ends in the transport's dead letter: counted so, not retried.
    assert (report.retried, report.dead_lettered, report.acked) == (1, 1, 1)
    [dead] = queue.dead_letters()
    assert dead.reason == "max_attempts (2) exhausted"


def test_concurrency_keeps_groups_exclusive_and_ordered(kind: str) -> None:
    store = MemoryStore()
    publish(store, groups=8, per_group=6)
    lock = threading.Lock()
    active: dict[str, int] = defaultdict(int)
    order: dict[str, list[int]] = defaultdict(list)
    overlaps: list[str] = []
    peak = [0, 0]

    def handler(event: Event, lease: Lease) -> None:
        with lock:
            active[lease.group_id] += 1
            peak[0] += 1
            peak[1] = max(peak)
            if active[lease.group_id] > 1:
                overlaps.append(lease.group_id)
            order[lease.group_id].append(event.data["i"])  # type: ignore[arg-type, call-overload, index]
        time.sleep(0.005)
        with lock:
            active[lease.group_id] -= 1
            peak[0] -= 1

    report = run_handler(kind, store, handler, concurrency=4)
    assert report.acked == 48
    assert not overlaps
    assert all(seq == list(range(6)) for seq in order.values())
    if kind == "sync":  # the async kind runs this blocking handler in threads as well
        assert peak[1] > 1


def test_batches_use_claim_many_and_keep_groups_ordered(kind: str) -> None:
    store = MemoryStore()
    publish(store, groups=5, per_group=4)
    recorder = Recorder()
    order: dict[int, list[int]] = defaultdict(list)
    lock = threading.Lock()

    def handler(event: Event) -> None:
        with lock:
            order[event.data["g"]].append(event.data["i"])  # type: ignore[arg-type, call-overload, index]

    report = run_handler(
        kind,
        store,
        handler,
        batch_size=3,
        concurrency=2,
        wrap=lambda t: proxy_for(kind)(t, recorder=recorder),
    )
    assert report.acked == 20
    assert recorder.count("claim_many") >= 1
    assert recorder.count("claim") == 0
    assert all(seq == [0, 1, 2, 3] for seq in order.values())


def test_min_priority_leaves_lower_groups_alone(kind: str) -> None:
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    queue.publish("low", Event(kind="k"), priority=0)
    queue.publish("high", Event(kind="k"), priority=3)
    seen: list[str] = []

    def handler(event: Event, lease: Lease) -> None:
        seen.append(lease.group_id)

    run_handler(kind, store, handler, min_priority=2)
    assert seen == ["high"]
    assert queue.stats().messages == 1


def test_stop_worker_releases_the_message_and_run_raises_its_error(kind: str) -> None:
    """StopWorker is not the message's failure: it is released without a retry delay (not
    retried until dead-lettered), the worker stops and run() raises the error it carried."""
    from pgque.core import ConfigurationError
    from pgque.core.worker import StopWorker

    store = MemoryStore()
    queue = publish(store, groups=3, per_group=1)
    calls: list[int] = []

    def handler(event: Event) -> None:
        calls.append(1)
        raise StopWorker(ConfigurationError("cannot work like this"))

    with pytest.raises(ConfigurationError, match="cannot work like this"):
        run_handler(kind, store, handler)
    assert len(calls) == 1  # stopped at the first, the others never ran
    assert queue.dead_letters() == []
    stats = queue.stats()
    assert (stats.messages, stats.in_flight, stats.parked) == (3, 0, 0)
