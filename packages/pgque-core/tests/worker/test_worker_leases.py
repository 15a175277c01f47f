"""Lease renewal of long handlers, hard timeouts and lost leases, on both runners."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from _worker_helpers import AsyncProxy, Proxy, Recorder, make_worker, run

from pgque.core import (
    AsyncInMemoryTransport,
    Event,
    InMemoryTransport,
    Lease,
    MemoryStore,
    RetryPolicy,
)

pytestmark = pytest.mark.timeout(30)


def _publish(store: MemoryStore, n: int = 1, groups: int = 1) -> InMemoryTransport:
    queue = InMemoryTransport(store=store)
    for i in range(n):
        queue.publish(f"g{i % groups}", Event(kind="k", data={"i": i}))
    return queue


def _sync_sleeper(seconds: float, log: list[Any]) -> Any:
    def handler(event: Event, lease: Lease) -> None:
        log.append(("start", lease.attempt))
        time.sleep(seconds if lease.attempt == 1 else 0)
        log.append(("end", lease.attempt))

    return handler


def _async_sleeper(seconds: float, log: list[Any]) -> Any:
    async def handler(event: Event, lease: Lease) -> None:
        log.append(("start", lease.attempt))
        try:
            await asyncio.sleep(seconds if lease.attempt == 1 else 0)
        except asyncio.CancelledError:
            log.append(("cancelled", lease.attempt))
            raise
        log.append(("end", lease.attempt))

    return handler


def _worker(kind: str, store: MemoryStore, handler: Any, recorder: Recorder, **options: Any) -> Any:
    if kind == "sync":
        transport: Any = Proxy(InMemoryTransport(store=store), recorder=recorder)
    else:
        transport = AsyncProxy(AsyncInMemoryTransport(store=store), recorder=recorder)
    return make_worker(kind, transport, handler, **options)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_long_handlers_keep_their_lease(kind: str) -> None:
    store = MemoryStore()
    queue = _publish(store)
    recorder = Recorder()
    log: list[tuple[str, int]] = []
    sleeper = _sync_sleeper if kind == "sync" else _async_sleeper
    thief = InMemoryTransport(store=store)
    stolen: list[Any] = []

    def steal() -> None:  # another worker tries the group while the handler runs
        time.sleep(0.6)
        stolen.append(thief.claim(visibility=1.0))

    threading.Thread(target=steal).start()
    report = run(_worker(kind, store, sleeper(0.9, log), recorder, visibility=0.3))
    assert log == [("start", 1), ("end", 1)]
    assert report.acked == 1
    assert report.lost == 0
    assert recorder.count("extend") >= 4  # every 0.15 s for 0.9 s
    assert stolen == [None]
    assert queue.stats().messages == 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_waiting_leases_of_a_batch_are_renewed_too(kind: str) -> None:
    store = MemoryStore()
    _publish(store, n=3, groups=3)
    recorder = Recorder()
    log: list[tuple[str, int]] = []
    sleeper = _sync_sleeper if kind == "sync" else _async_sleeper
    report = run(_worker(kind, store, sleeper(0.25, log), recorder, visibility=0.2, batch_size=3))
    assert [entry for entry in log if entry[0] == "start"] == [("start", 1)] * 3
    assert report.acked == 3
    assert report.lost == 0
    assert recorder.count("claim_many") >= 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_hard_timeout_stops_the_handler_and_never_lets_two_attempts_overlap(kind: str) -> None:
    """Attempt 1 runs past hard_timeout: an asyncio task is cancelled; a thread cannot be, so
    its lease is kept (renewed) until it returns. Either way the timeout counts an attempt
    (nacked with the TimeoutError) and attempt 2 starts only after attempt 1 ended."""
    store = MemoryStore()
    queue = _publish(store)
    recorder = Recorder()
    log: list[tuple[str, int]] = []
    sleeper = _sync_sleeper if kind == "sync" else _async_sleeper
    worker = _worker(
        kind,
        store,
        sleeper(0.6, log),
        recorder,
        visibility=0.4,
        hard_timeout=0.1,
        retry=RetryPolicy(base=0.01, jitter=0),
    )
    report = run(worker)
    assert (report.timed_out, report.acked, report.claimed) == (1, 1, 2)
    [acked] = recorder.args("ack")
    assert acked.attempt == 2
    [(nacked, _delay)] = recorder.args("nack")
    assert nacked.attempt == 1
    if kind == "async":
        assert log == [("start", 1), ("cancelled", 1), ("start", 2), ("end", 2)]
        assert recorder.count("extend") == 0
    else:
        assert log == [("start", 1), ("end", 1), ("start", 2), ("end", 2)]  # never beside
        assert recorder.count("extend") >= 1  # the thread's lease was kept past 0.4 s
    assert queue.stats().messages == 0


def _blocking_as(kind: str, handler: Any) -> Any:
    """Return *handler*, or for the async kind an ``async def`` running it in a thread."""
    if kind == "sync":
        return handler

    async def async_handler(event: Event, lease: Lease) -> None:
        await asyncio.to_thread(handler, event, lease)

    return async_handler


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_lease_that_expires_unrenewed_is_reported_lost(kind: str) -> None:
    store = MemoryStore()
    queue = _publish(store, n=1)
    recorder = Recorder()
    other = InMemoryTransport(store=store)

    def handler(event: Event, lease: Lease) -> None:
        time.sleep(0.25)  # the 0.1 s lease cannot be renewed and expires
        reclaimed = other.claim(visibility=5.0)  # another worker takes the message
        assert reclaimed is not None
        assert reclaimed.attempt == 2
        assert other.ack(reclaimed)

    worker = _worker(kind, store, _blocking_as(kind, handler), recorder, visibility=0.1)
    worker._transport.faults.plan["extend"] = ["before"] * 100  # the connection is down
    report = run(worker)
    assert (report.lost, report.acked) == (1, 0)
    assert report.errors >= 1
    assert recorder.successes("ack") == []  # our ack came back False: fenced
    assert queue.stats().messages == 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_extend_returning_none_marks_the_lease_lost_without_settling_it(kind: str) -> None:
    store = MemoryStore()
    queue = _publish(store, n=1)
    recorder = Recorder()

    def handler(event: Event, lease: Lease) -> None:
        if lease.attempt == 1:
            time.sleep(0.2)

    worker = _worker(kind, store, _blocking_as(kind, handler), recorder, visibility=0.1)
    proxy = worker._transport

    if kind == "sync":

        def extend(lease: Lease, visibility: float) -> None:
            recorder.add("extend", lease)

    else:

        async def extend(lease: Lease, visibility: float) -> None:  # type: ignore[misc]
            recorder.add("extend", lease)

    proxy.extend = extend  # the store says: not held any more
    report = run(worker)
    assert (report.lost, report.acked, report.claimed) == (1, 1, 2)
    assert [lease.attempt for lease in recorder.args("ack")] == [2]  # no ack for the lost one
    assert recorder.count("extend") >= 1
    assert queue.stats().messages == 0
