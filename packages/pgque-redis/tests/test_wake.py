"""Pub/sub wake-up: an idle worker hears a publish at once instead of polling."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pgque.core import AsyncWorker, Event, Worker
from pgque.redis import AsyncRedisTransport, RedisTransport

pytestmark = pytest.mark.timeout(30)


def test_a_publish_ends_the_wait(transport_factory: Callable[..., RedisTransport]) -> None:
    consumer = transport_factory()
    producer = transport_factory(queue=consumer.queue)
    assert consumer.wait_for_messages(5.0) is True  # just subscribed: claim again
    assert consumer.wait_for_messages(0.2) is False
    start = time.monotonic()
    timer = threading.Timer(0.2, lambda: producer.publish("g", Event(kind="k")))
    timer.start()
    assert consumer.wait_for_messages(10.0) is True
    assert time.monotonic() - start < 5.0
    timer.join()


def test_publish_many_nack_and_redrive_wake(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    consumer = transport_factory()
    producer = transport_factory(queue=consumer.queue)
    consumer.wait_for_messages(0.1)
    producer.publish_many([("a", Event(kind="k")), ("b", Event(kind="k"))])
    assert consumer.wait_for_messages(5.0) is True
    assert consumer.wait_for_messages(0.2) is False  # one batch, one wake-up
    lease = producer.claim()
    assert lease is not None
    assert producer.nack(lease, delay=60.0)
    assert consumer.wait_for_messages(0.2) is False  # parked: nothing claimable yet
    other = producer.claim()
    assert other is not None
    assert producer.dead_letter(other, "bad")
    assert consumer.wait_for_messages(0.2) is False
    assert producer.redrive() == 1
    assert consumer.wait_for_messages(5.0) is True


def test_an_idle_worker_handles_a_publish_without_waiting_for_its_poll(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    consumer = transport_factory()
    producer = transport_factory(queue=consumer.queue)
    handled: list[float] = []
    done = threading.Event()

    def handler(_event: Event) -> None:
        handled.append(time.monotonic())
        done.set()

    # An idle poll of 20 s: only a wake-up can explain a quick pick-up.
    worker = Worker(consumer, handler, idle_backoff=(20.0, 20.0), shutdown_grace=1.0)
    runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    runner.start()
    try:
        time.sleep(0.5)
        published = time.monotonic()
        producer.publish("g", Event(kind="k"))
        assert done.wait(10.0), "the publish was not handled"
        assert handled[0] - published < 2.0
    finally:
        worker.stop()
        producer.publish("g", Event(kind="wake"))  # end the worker's wait now, not in 20 s
        runner.join(30)


@pytest.mark.asyncio
async def test_async_waiters_all_wake_and_a_worker_picks_up(
    redis_url: str, new_queue: Callable[[], str]
) -> None:
    queue = new_queue()
    consumer = AsyncRedisTransport(redis_url, queue=queue)
    producer = AsyncRedisTransport(redis_url, queue=queue)
    try:
        assert await consumer.wait_for_messages(5.0) is True
        waiters = [asyncio.ensure_future(consumer.wait_for_messages(10.0)) for _ in range(3)]
        await asyncio.sleep(0.2)
        await producer.publish("g", Event(kind="k"))
        assert await asyncio.gather(*waiters) == [True, True, True]
        done = asyncio.Event()

        async def handler(_event: Event) -> None:
            done.set()

        worker = AsyncWorker(consumer, handler, idle_backoff=(20.0, 20.0), shutdown_grace=1.0)
        runner: asyncio.Future[Any] = asyncio.ensure_future(
            worker.run(install_signal_handlers=False)
        )
        await asyncio.wait_for(done.wait(), 5.0)  # the backlog of one
        done.clear()
        await asyncio.sleep(0.3)
        published = time.monotonic()
        await producer.publish("g", Event(kind="k"))
        await asyncio.wait_for(done.wait(), 10.0)
        assert time.monotonic() - published < 2.0
        worker.stop()
        await producer.publish("g", Event(kind="wake"))
        await asyncio.wait_for(runner, 30)
    finally:
        await consumer.close()
        await producer.close()


@pytest.mark.asyncio
async def test_a_wait_cancelled_while_subscribing_does_not_stop_later_wake_ups(
    redis_url: str, new_queue: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.asyncio.client import PubSub

    queue = new_queue()
    consumer = AsyncRedisTransport(redis_url, queue=queue)
    producer = AsyncRedisTransport(redis_url, queue=queue)
    real_subscribe = PubSub.subscribe

    async def cancelled_subscribe(self: PubSub, *args: Any, **kwargs: Any) -> None:
        raise asyncio.CancelledError  # the caller's task was cancelled mid-subscribe

    try:
        monkeypatch.setattr(PubSub, "subscribe", cancelled_subscribe)
        with pytest.raises(asyncio.CancelledError):
            await consumer.wait_for_messages(5.0)
        monkeypatch.setattr(PubSub, "subscribe", real_subscribe)
        assert await consumer.wait_for_messages(5.0) is True  # subscribes afresh
        waiter = asyncio.ensure_future(consumer.wait_for_messages(10.0))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await producer.publish("g", Event(kind="k"))
        assert await waiter is True
        assert time.monotonic() - started < 5.0
    finally:
        await consumer.close()
        await producer.close()
