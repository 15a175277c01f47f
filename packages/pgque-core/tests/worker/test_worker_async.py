"""What only the asyncio runner does: async handlers side by side, blocking handlers off the
event loop, and run() inside a larger program."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from _worker_helpers import make_worker

from pgque.core import AsyncInMemoryTransport, Event, InMemoryTransport, MemoryStore

pytestmark = pytest.mark.timeout(30)


def _publish(store: MemoryStore, n: int) -> None:
    queue = InMemoryTransport(store=store)
    for i in range(n):
        queue.publish(f"g{i}", Event(kind="k"))


def test_async_handlers_run_side_by_side() -> None:
    store = MemoryStore()
    _publish(store, 10)
    running = [0, 0]

    async def handler(event: Event) -> None:
        running[0] += 1
        running[1] = max(running)
        await asyncio.sleep(0.1)
        running[0] -= 1

    async def main() -> float:
        worker = make_worker("async", AsyncInMemoryTransport(store=store), handler, concurrency=10)
        started = time.monotonic()
        report = await worker.run(stop_when_idle=True, install_signal_handlers=False)
        assert report.acked == 10
        return time.monotonic() - started

    elapsed = asyncio.run(main())
    assert running[1] == 10
    assert elapsed < 0.9  # ten 100 ms handlers side by side, not one after another


def test_blocking_handlers_run_in_threads_off_the_loop() -> None:
    store = MemoryStore()
    _publish(store, 2)
    threads: list[str] = []
    ticks: list[float] = []

    def handler(event: Event) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(0.2)

    async def ticker(stop: asyncio.Event) -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    async def main() -> None:
        stop = asyncio.Event()
        tick = asyncio.ensure_future(ticker(stop))
        worker = make_worker(
            "async", AsyncInMemoryTransport(store=store), handler, concurrency=2, name="aw"
        )
        report = await worker.run(stop_when_idle=True, install_signal_handlers=False)
        stop.set()
        await tick
        assert report.acked == 2

    asyncio.run(main())
    assert threads == ["aw-handler", "aw-handler"]
    assert len(ticks) >= 5  # the loop kept running while the handlers slept


def test_cancelling_run_releases_in_flight_messages() -> None:
    store = MemoryStore()
    _publish(store, 1)
    queue = InMemoryTransport(store=store)

    async def handler(event: Event) -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        worker = make_worker("async", AsyncInMemoryTransport(store=store), handler)
        task = asyncio.ensure_future(worker.run(install_signal_handlers=False))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not worker.running

    asyncio.run(main())
    stats = queue.stats()
    assert (stats.messages, stats.in_flight) == (1, 0)
