"""Idle waiting: exponential backoff between empty claims, or the transport's wake-up."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from _worker_helpers import KINDS, AsyncProxy, Proxy, Recorder, make_transport, make_worker, run

from pgque.core import AsyncInMemoryTransport, Event, InMemoryTransport, MemoryStore, QueueStats

pytestmark = [pytest.mark.timeout(30), pytest.mark.parametrize("kind", KINDS)]


def _handler(kind: str, handled: list[float]) -> Any:
    def handler(event: Event) -> None:
        handled.append(time.monotonic())

    if kind == "sync":
        return handler

    async def async_handler(event: Event) -> None:
        handler(event)

    return async_handler


def _run_for(worker: Any, seconds: float) -> Any:
    timer = threading.Timer(seconds, worker.stop)
    timer.start()
    try:
        return run(worker, stop_when_idle=False)
    finally:
        timer.cancel()


def test_an_idle_worker_backs_off_instead_of_spinning(kind: str) -> None:
    store, recorder = MemoryStore(), Recorder()
    proxy = Proxy if kind == "sync" else AsyncProxy
    transport = proxy(make_transport(kind, store), recorder=recorder)
    worker = make_worker(kind, transport, _handler(kind, []), idle_backoff=(0.01, 0.08))
    _run_for(worker, 0.6)
    # 0.01 + 0.02 + 0.04, then every 0.08 s: about ten claims in 0.6 s, not thousands
    assert 5 <= recorder.count("claim") <= 16


def test_work_after_idling_resets_the_backoff(kind: str) -> None:
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    handled: list[float] = []
    worker = make_worker(
        kind, make_transport(kind, store), _handler(kind, handled), idle_backoff=(0.01, 0.2)
    )
    published: list[float] = []

    def later() -> None:
        time.sleep(0.5)  # the worker is at its longest wait by now
        for i in range(3):
            published.append(time.monotonic())
            queue.publish("g", Event(kind="k", data={"i": i}))
            time.sleep(0.05)

    feeder = threading.Thread(target=later)
    feeder.start()
    _run_for(worker, 1.0)
    feeder.join()
    assert len(handled) == 3
    assert handled[0] - published[0] <= 0.5  # within one maximum wait (0.2 s), with slack
    assert handled[2] - published[2] <= 0.15  # backoff was reset by the first message


class _Waiting:
    """A transport with ``wait_for_messages``: the hook LISTEN/NOTIFY fills on Postgres."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.calls: list[float] = []

    def publish_and_wake(self, queue: InMemoryTransport) -> None:
        queue.publish("g", Event(kind="k"))
        self.wake.set()


class WaitingProxy(Proxy, _Waiting):
    def __init__(self, inner: Any) -> None:
        Proxy.__init__(self, inner)
        _Waiting.__init__(self)

    def wait_for_messages(self, timeout: float) -> bool:
        self.calls.append(timeout)
        woken = self.wake.wait(timeout)
        self.wake.clear()
        return woken


class AsyncWaitingProxy(AsyncProxy, _Waiting):
    def __init__(self, inner: Any) -> None:
        AsyncProxy.__init__(self, inner)
        _Waiting.__init__(self)

    async def wait_for_messages(self, timeout: float) -> bool:
        self.calls.append(timeout)
        woken = await asyncio.to_thread(self.wake.wait, timeout)
        self.wake.clear()
        return woken


def test_wait_for_messages_replaces_sleeping(kind: str) -> None:
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    proxy_class = WaitingProxy if kind == "sync" else AsyncWaitingProxy
    transport = proxy_class(make_transport(kind, store))
    handled: list[float] = []
    worker = make_worker(kind, transport, _handler(kind, handled), idle_backoff=(0.3, 1.0))
    published: list[float] = []

    def later() -> None:
        time.sleep(0.45)
        published.append(time.monotonic())
        transport.publish_and_wake(queue)

    feeder = threading.Thread(target=later)
    feeder.start()
    _run_for(worker, 1.0)
    feeder.join()
    assert transport.calls[:2] == [0.3, 0.6]  # the idle backoff is its timeout
    assert len(handled) == 1
    assert handled[0] - published[0] < 0.3  # woken, not at the end of the wait (at 0.9 s)


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class _ParkEndsBeforeStats(InMemoryTransport):
    """Time passes between the empty claim and the stats call: the park ends in between."""

    def __init__(self, clock: _Clock, **options: Any) -> None:
        super().__init__(clock=clock, **options)
        self._clock_ref = clock

    def stats(self) -> QueueStats:
        self._clock_ref.now += 10.0
        return super().stats()


class _AsyncParkEndsBeforeStats(AsyncInMemoryTransport):
    def __init__(self, clock: _Clock, **options: Any) -> None:
        super().__init__(clock=clock, **options)
        self._clock_ref = clock

    async def stats(self) -> QueueStats:
        self._clock_ref.now += 10.0
        return await super().stats()


def test_stop_when_idle_does_not_stop_on_a_park_that_ended_after_the_claim(kind: str) -> None:
    clock = _Clock()
    store = MemoryStore()
    setup = InMemoryTransport(store=store, clock=clock)
    setup.publish("g", Event(kind="k"))
    lease = setup.claim(30.0)
    assert lease is not None
    assert setup.nack(lease, delay=5.0)  # parked until now + 5 s
    cls = _ParkEndsBeforeStats if kind == "sync" else _AsyncParkEndsBeforeStats
    transport = cls(clock, store=store)
    handled: list[float] = []
    report = run(make_worker(kind, transport, _handler(kind, handled)))
    assert len(handled) == 1
    assert report.claimed == 1
    assert setup.stats().messages == 0
