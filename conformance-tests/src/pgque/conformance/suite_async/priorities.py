"""Priorities and fairness: round-robin between groups and the min_priority floor."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from typing import Any

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _n,
)
from pgque.core import AsyncTransport

# -- round-robin ---------------------------------------------------------------------------


async def test_served_group_yields_to_never_served(atransport: AsyncTransport) -> None:
    await atransport.publish("a", _ev("a1"))
    await atransport.publish("a", _ev("a2"))
    first = await _claim(atransport)
    assert first.group_id == "a"
    assert await atransport.ack(first)
    await atransport.publish("b", _ev("b1"))
    assert (await _claim(atransport)).group_id == "b"


async def test_round_robin_cycles_through_groups(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    for i in range(3):
        for g in "abc":
            await atransport.publish(g, _ev(f"{g}{i}"))
    order: list[Any] = []
    while (lease := await atransport.claim(60.0)) is not None:
        order.append(_n(lease))
        assert await atransport.ack(lease)
        # Service times must differ: a group served at the same instant ties by group id.
        await harness.advance(0.001)
    assert order == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]


async def test_never_served_groups_go_by_group_id(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("global_fairness")
    for g in ["m", "b", "z", "a", "B", "é", "0"]:
        await atransport.publish(g, _ev(g))
    order = [g for g, _n in await _drain(atransport)]
    assert order == sorted(["m", "b", "z", "a", "B", "é", "0"])


async def test_hot_group_cannot_starve_cold_groups(atransport: AsyncTransport) -> None:
    await atransport.publish_many([("a-hot", _ev(i)) for i in range(1000)])
    cold = [f"z-cold-{i:02d}" for i in range(50)]
    first = await _claim(atransport)
    assert first.group_id == "a-hot"
    assert await atransport.ack(first)
    await atransport.publish_many([(g, _ev(g)) for g in cold])
    served: list[str] = [first.group_id]
    # Round-robin over all groups serves every cold group before the hot one again. Over
    # shards (no global_fairness) shards take turns, and the hot group's shard, out of cold
    # groups sooner, serves it once a turn: every cold group still comes within twice as many.
    claims = 51 if atransport.capabilities.global_fairness else 102
    while len(served) < claims and not set(cold) <= set(served):
        lease = await _claim(atransport)
        served.append(lease.group_id)
        assert await atransport.ack(lease)
    assert set(cold) <= set(served)
    assert (await atransport.stats()).messages == 1000 - served.count("a-hot")


# -- priority ------------------------------------------------------------------------------


async def test_min_priority_filters(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    harness.require("global_fairness")
    harness.require("priorities")
    for p in range(5):
        await atransport.publish(f"p{p}", _ev(p), priority=p)
    got = await atransport.claim_many(10, min_priority=3)
    assert sorted(lease.priority for lease in got) == [3, 4]
    lease = await _claim(atransport, min_priority=1)
    assert (lease.group_id, lease.priority) == ("p1", 1)
    assert (await _claim(atransport, min_priority=1)).group_id == "p2"
    assert await atransport.claim(min_priority=1) is None
    assert (await _claim(atransport)).group_id == "p0"


async def test_high_priority_found_behind_low_priority_backlog(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("priorities")
    await atransport.publish_many([(f"low-{i:03d}", _ev(i)) for i in range(500)], priority=0)
    await atransport.publish("zzz-urgent", _ev("urgent"), priority=4)
    lease = await _claim(atransport, min_priority=4)
    assert (lease.group_id, lease.priority) == ("zzz-urgent", 4)
    assert await atransport.ack(lease)
    assert await atransport.claim(min_priority=1) is None
    assert (await atransport.stats()).messages == 500


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
