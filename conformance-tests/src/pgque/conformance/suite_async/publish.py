"""Publish: FIFO within a group, publish_many, and publishing into a busy group."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _empty_stats_ok,
    _ev,
    _n,
)
from pgque.core import AsyncTransport

# -- FIFO ----------------------------------------------------------------------------------


async def test_publish_returns_increasing_ids(atransport: AsyncTransport) -> None:
    ids = [await atransport.publish(f"g{i % 3}", _ev(i)) for i in range(10)]
    assert all(isinstance(i, int) for i in ids)
    if atransport.capabilities.global_id_order:
        assert ids == sorted(ids)
    else:  # ids grow within each group only (sharded queues)
        for k in range(3):
            assert ids[k::3] == sorted(ids[k::3])
    assert len(set(ids)) == len(ids)


async def test_fifo_within_group_many_messages(atransport: AsyncTransport) -> None:
    ids = [await atransport.publish("g", _ev(i)) for i in range(60)]
    seen: list[int] = []
    for i in range(60):
        lease = await _claim(atransport)
        assert lease.message_id == ids[i]
        seen.append(_n(lease))
        assert await atransport.ack(lease)
    assert seen == list(range(60))
    assert await atransport.claim() is None


async def test_fifo_after_nack(atransport: AsyncTransport) -> None:
    for i in range(5):
        await atransport.publish("g", _ev(i))
    order: list[int] = []
    for i in range(5):
        first = await _claim(atransport)
        assert await atransport.nack(first)
        again = await _claim(atransport)
        assert again.message_id == first.message_id
        assert _n(again) == i
        assert await atransport.ack(again)
        order.append(_n(again))
    assert order == list(range(5))


async def test_publish_many_keeps_order_per_group(atransport: AsyncTransport) -> None:
    items = [(f"g{i % 4}", _ev(i)) for i in range(40)]
    ids = await atransport.publish_many(items)
    assert len(ids) == 40
    if atransport.capabilities.global_id_order:
        assert ids == sorted(ids)
    else:  # ids grow within each group only (sharded queues)
        for k in range(4):
            assert ids[k::4] == sorted(ids[k::4])
    assert len(set(ids)) == 40
    per_group: dict[str, list[int]] = {}
    for group, n in await _drain(atransport):
        per_group.setdefault(group, []).append(n)
    assert per_group == {f"g{k}": list(range(k, 40, 4)) for k in range(4)}


async def test_publish_many_of_nothing(atransport: AsyncTransport) -> None:
    assert await atransport.publish_many([]) == []
    await _empty_stats_ok(atransport)


# -- publish into a busy group -------------------------------------------------------------


async def test_publish_into_in_flight_group_keeps_lease(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1), priority=3)
    lease = await _claim(atransport, 5 * harness.unit)
    await atransport.publish("g", _ev(2), priority=0)
    await atransport.publish_many([("g", _ev(3))], priority=1)
    assert await atransport.claim() is None
    stats = await atransport.stats()
    assert (stats.in_flight, stats.messages) == (1, 3)
    assert await atransport.ack(lease)
    nxt = await _claim(atransport, min_priority=3)
    assert (_n(nxt), nxt.priority) == (2, 3)


async def test_publish_into_parked_group_keeps_park(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish("g", _ev(1), priority=2)
    lease = await _claim(atransport)
    assert await atransport.nack(lease, delay=2 * u)
    await atransport.publish("g", _ev(2), priority=4)
    assert await atransport.claim() is None
    assert (await atransport.stats()).parked == 1
    await harness.advance(2.5 * u)
    back = await _claim(atransport, min_priority=2)
    assert (_n(back), back.priority, back.attempt) == (1, 2, 2)


async def test_priority_fixed_by_first_publish(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("priorities")
    await atransport.publish("g", _ev(1), priority=1)
    await atransport.publish("g", _ev(2), priority=4)
    assert await atransport.claim(min_priority=2) is None
    lease = await _claim(atransport, min_priority=1)
    assert lease.priority == 1
    assert await atransport.ack(lease)
    assert (await _claim(atransport)).priority == 1


async def test_priority_resets_after_drain(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("priorities")
    await atransport.publish("g", _ev(1), priority=4)
    assert await atransport.ack(await _claim(atransport, min_priority=4))
    await atransport.publish("g", _ev(2), priority=0)
    assert await atransport.claim(min_priority=1) is None
    assert (await _claim(atransport)).priority == 0


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
