"""LISTEN/NOTIFY wake-up on the asyncio transport: waiters end at a publish's commit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from pgque.core import AsyncWorker, Event
from pgque.postgres_async import AsyncPostgresTransport

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]

Make = Callable[..., Awaitable[AsyncPostgresTransport]]


async def test_a_publish_ends_every_waiter(async_transport_factory: Make) -> None:
    consumer = await async_transport_factory()
    producer = await async_transport_factory(queue=consumer.queue)
    assert await consumer.wait_for_messages(5.0) is True  # just started listening
    start = time.monotonic()
    waiters = [asyncio.ensure_future(consumer.wait_for_messages(10.0)) for _ in range(3)]
    await asyncio.sleep(0.2)
    await producer.publish("g", Event(kind="k"))
    assert await asyncio.gather(*waiters) == [True, True, True]
    assert time.monotonic() - start < 5.0
    assert await consumer.wait_for_messages(0.2) is False


async def test_an_idle_worker_handles_a_publish_without_waiting_for_its_poll(
    async_transport_factory: Make,
) -> None:
    consumer = await async_transport_factory()
    producer = await async_transport_factory(queue=consumer.queue)
    handled: list[float] = []
    done = asyncio.Event()

    async def handler(_event: Event) -> None:
        handled.append(time.monotonic())
        done.set()

    worker = AsyncWorker(consumer, handler, idle_backoff=(20.0, 20.0), shutdown_grace=1.0)
    runner = asyncio.ensure_future(worker.run(install_signal_handlers=False))
    try:
        await asyncio.sleep(0.5)
        published = time.monotonic()
        await producer.publish("g", Event(kind="k"))
        await asyncio.wait_for(done.wait(), 10.0)
        assert handled[0] - published < 2.0
    finally:
        worker.stop()
        await producer.publish("g", Event(kind="wake"))  # end the worker's wait now
        await asyncio.wait_for(runner, 30)
