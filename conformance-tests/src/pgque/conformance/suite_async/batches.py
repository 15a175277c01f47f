"""Batches: claim_many returns distinct groups and equals one-by-one claims; ack_many."""

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
from pgque.core import (
    AsyncTransport,
    Lease,
)

# -- claim_many ----------------------------------------------------------------------------


async def test_claim_many_returns_distinct_groups(atransport: AsyncTransport) -> None:
    await atransport.publish_many([("a", _ev(i)) for i in range(5)])
    await atransport.publish_many([("b", _ev(i)) for i in range(5)])
    await atransport.publish("c", _ev(0))
    leases = await atransport.claim_many(10)
    assert sorted(lease.group_id for lease in leases) == ["a", "b", "c"]
    assert all(_n(lease) == 0 for lease in leases)
    assert await atransport.claim_many(10) == []
    assert await atransport.ack_many(leases) == [True, True, True]
    again = await atransport.claim_many(10)
    assert sorted(lease.group_id for lease in again) == ["a", "b"]
    assert all(_n(lease) == 1 for lease in again)


async def test_claim_many_respects_n(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    harness.require("global_fairness")
    await atransport.publish_many([(f"g{i}", _ev(i)) for i in range(6)])
    first = await atransport.claim_many(4)
    assert [lease.group_id for lease in first] == ["g0", "g1", "g2", "g3"]
    rest = await atransport.claim_many(4)
    assert [lease.group_id for lease in rest] == ["g4", "g5"]


async def _claim_many_scenario(transport: AsyncTransport, harness: AsyncHarness) -> None:
    for i in range(8):
        for k in range(i % 3 + 1):
            await transport.publish(f"g{i}", _ev(f"{i}.{k}"), priority=i % 2)
    # Serve some groups at distinct times so the round-robin keys differ.
    for group in ("g3", "g0", "g6"):
        while True:
            lease = await _claim(transport)
            if lease.group_id == group:
                assert await transport.ack(lease)
                break
            assert await transport.nack(lease)
        await harness.advance(0.01)


async def test_claim_many_matches_one_by_one(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("global_fairness")
    harness.require("injected_clock")
    batch_q = atransport
    single_q = await harness.make()
    await _claim_many_scenario(batch_q, harness)
    await _claim_many_scenario(single_q, harness)

    def view(lease: Lease) -> tuple[str, Any, int, int]:
        return (lease.group_id, _n(lease), lease.attempt, lease.priority)

    for n in (3, 2, 10):
        batch = [view(lease) for lease in await batch_q.claim_many(n, 60.0)]
        single: list[tuple[str, Any, int, int]] = []
        for _ in range(n):
            lease = await single_q.claim(60.0)
            if lease is None:
                break
            single.append(view(lease))
        assert batch == single


async def test_ack_many_reports_each_lease(atransport: AsyncTransport) -> None:
    await atransport.publish_many([("a", _ev(1)), ("a", _ev(2)), ("b", _ev(3))])
    a1 = await _claim(atransport)
    b1 = await _claim(atransport)
    assert await atransport.ack(a1)
    assert await atransport.ack_many([a1, b1]) == [False, True]
    assert await atransport.ack_many([]) == []
    assert [n for _g, n in await _drain(atransport)] == [2]


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
