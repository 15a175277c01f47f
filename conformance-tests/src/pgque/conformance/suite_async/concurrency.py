"""Concurrency: a second worker shares a queue, queues are isolated, a concurrent drain."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from pgque.conformance._concurrency_async import (
    test_a_waiter_caps_its_wait_for_a_message_scheduled_meanwhile,
    test_concurrent_drain_tasks,
    test_one_tick_racing_from_several_workers,
    test_pause_racing_claims,
    test_redrive_racing_publishes,
)
from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _n,
)
from pgque.core import AsyncTransport

# -- workers and queues --------------------------------------------------------------------


async def test_second_worker_shares_the_queue(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    worker2 = await harness.make(queue=atransport.queue)
    assert worker2.queue == atransport.queue
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(worker2)
    assert await atransport.claim() is None
    assert await atransport.ack(lease)  # a lease is valid on any worker of the queue
    assert _n(await _claim(atransport)) == 2


async def test_queues_are_isolated(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    other = await harness.make()
    assert other.queue != atransport.queue
    await atransport.publish("g", _ev(1))
    assert await other.claim() is None
    assert (await other.stats()).messages == 0
    await other.publish("g", _ev(2))
    assert [n for _g, n in await _drain(atransport)] == [1]
    assert [n for _g, n in await _drain(other)] == [2]


# The drain test is hand-written per flavour: tasks for asyncio, threads for blocking.
_CONCURRENCY = (
    test_concurrent_drain_tasks,
    test_pause_racing_claims,
    test_redrive_racing_publishes,
    test_one_tick_racing_from_several_workers,
    test_a_waiter_caps_its_wait_for_a_message_scheduled_meanwhile,
)


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
