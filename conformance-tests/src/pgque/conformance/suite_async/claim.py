"""Claim and fencing: one lease per group, expiry, fencing of stale holders, extend."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _empty_stats_ok,
    _ev,
    _n,
    _snapshot,
)
from pgque.core import (
    AsyncTransport,
    Event,
    Lease,
)

# -- one lease per group -------------------------------------------------------------------


async def test_one_lease_per_group(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert _n(lease) == 1
    assert await atransport.claim() is None
    assert await atransport.claim_many(3) == []


async def test_other_groups_stay_claimable(atransport: AsyncTransport) -> None:
    await atransport.publish("a", _ev("a1"))
    await atransport.publish("a", _ev("a2"))
    await atransport.publish("b", _ev("b1"))
    first = await _claim(atransport)
    second = await _claim(atransport)
    assert {first.group_id, second.group_id} == {"a", "b"}
    assert await atransport.claim() is None


async def test_none_when_all_groups_in_flight(atransport: AsyncTransport) -> None:
    for g in range(5):
        for i in range(3):
            await atransport.publish(f"g{g}", _ev(i))
    leases = [await _claim(atransport) for _ in range(5)]
    assert sorted(lease.group_id for lease in leases) == [f"g{g}" for g in range(5)]
    assert await atransport.claim() is None
    assert (await atransport.stats()).in_flight == 5


async def test_ack_frees_the_group(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.claim() is None
    assert await atransport.ack(lease)
    assert _n(await _claim(atransport)) == 2


async def test_queue_ends_empty(atransport: AsyncTransport) -> None:
    await atransport.publish_many([(f"g{i % 7}", _ev(i)) for i in range(50)])
    assert len(await _drain(atransport)) == 50
    assert await atransport.claim() is None
    await _empty_stats_ok(atransport)


async def test_lease_fields(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    event = Event(kind="created", data={"x": [1, 2]}, headers={"h": "v"})
    message_id = await atransport.publish("order-1", event, priority=2)
    before = harness.now()
    lease = await _claim(atransport, 30.0)
    assert lease.group_id == "order-1"
    assert lease.message_id == message_id
    assert lease.event == event
    assert lease.priority == 2
    assert lease.attempt == 1
    assert lease.token
    assert lease.queue == atransport.queue
    if harness.fake_time:
        assert lease.expires_at == pytest.approx(before + 30.0, abs=1e-3)
    else:
        assert lease.expires_at > before


async def test_tokens_are_unique_per_claim(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev())
    tokens = set()
    for _ in range(5):
        lease = await _claim(atransport)
        tokens.add(lease.token)
        assert await atransport.nack(lease)
    assert len(tokens) == 5


# -- expiry --------------------------------------------------------------------------------


async def test_expired_lease_is_reclaimed_with_new_token(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    worker2 = await harness.make(queue=atransport.queue)
    await atransport.publish("g", _ev(1))
    first = await _claim(atransport, u)
    assert await worker2.claim(u) is None
    await harness.advance(1.5 * u)
    second = await _claim(worker2, 10 * u)
    assert second.message_id == first.message_id
    assert second.token != first.token
    assert second.attempt == first.attempt + 1 == 2
    assert await worker2.ack(second)


async def test_late_ack_succeeds_until_someone_reclaims(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport, harness.unit)
    await harness.advance(1.5 * harness.unit)
    assert await atransport.ack(lease)
    assert await atransport.claim() is None


# -- fencing -------------------------------------------------------------------------------


async def _stolen(transport: AsyncTransport, harness: AsyncHarness) -> tuple[Lease, Lease]:
    """Publish two messages; return (stale lease, the live lease that replaced it)."""
    await transport.publish("g", _ev(1))
    await transport.publish("g", _ev(2))
    stale = await _claim(transport, harness.unit)
    await harness.advance(1.5 * harness.unit)
    worker2 = await harness.make(queue=transport.queue)
    live = await _claim(worker2, 10 * harness.unit)
    assert live.message_id == stale.message_id
    return stale, live


async def test_stale_ack_is_fenced(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    stale, live = await _stolen(atransport, harness)
    before = await _snapshot(atransport)
    assert await atransport.ack(stale) is False
    assert await _snapshot(atransport) == before
    assert await atransport.ack(live)
    assert [n for _g, n in await _drain(atransport)] == [2]


async def test_stale_nack_is_fenced(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    stale, live = await _stolen(atransport, harness)
    before = await _snapshot(atransport)
    assert await atransport.nack(stale) is False
    assert await atransport.nack(stale, delay=100.0) is False
    assert await _snapshot(atransport) == before
    assert await atransport.claim() is None
    assert await atransport.ack(live)


async def test_stale_extend_is_fenced(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    stale, live = await _stolen(atransport, harness)
    before = await _snapshot(atransport)
    assert await atransport.extend(stale, 100 * harness.unit) is None
    assert await _snapshot(atransport) == before
    assert await atransport.ack(live)


async def test_stale_dead_letter_is_fenced(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    stale, live = await _stolen(atransport, harness)
    before = await _snapshot(atransport)
    assert await atransport.dead_letter(stale, "stale") is False
    assert await _snapshot(atransport) == before
    assert await atransport.dead_letters() == []
    assert await atransport.ack(live)


async def test_double_ack_is_harmless(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.ack(lease)
    assert await atransport.ack(lease) is False
    assert await atransport.ack_many([lease]) == [False]
    assert [n for _g, n in await _drain(atransport)] == [2]


async def test_ack_after_nack_is_fenced(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport)
    assert await atransport.nack(lease)
    assert await atransport.ack(lease) is False
    assert await atransport.extend(lease, 60.0) is None
    again = await _claim(atransport)
    assert await atransport.ack(again)


async def test_stale_lease_of_next_message_is_fenced(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    first = await _claim(atransport)
    assert await atransport.ack(first)
    await atransport.publish("g", _ev(2))
    second = await _claim(atransport)
    assert await atransport.nack(first) is False
    assert await atransport.ack(second)


# -- extend --------------------------------------------------------------------------------


async def test_extend_keeps_lease_alive_past_first_expiry(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    worker2 = await harness.make(queue=atransport.queue)
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport, 2 * u)
    await harness.advance(u)
    extended = await atransport.extend(lease, 3 * u)
    assert extended is not None
    await harness.advance(1.5 * u)  # past the first expiry, inside the extension
    assert await worker2.claim(u) is None
    assert (await atransport.stats()).in_flight == 1
    assert await atransport.ack(extended)
    assert await worker2.claim() is None


async def test_extend_returns_same_lease_with_new_expiry(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport, 10.0)
    await harness.advance(0.01)
    before = harness.now()
    extended = await atransport.extend(lease, 100.0)
    assert extended is not None
    assert (extended.token, extended.message_id, extended.attempt) == (
        lease.token,
        lease.message_id,
        lease.attempt,
    )
    assert extended.event == lease.event
    assert extended.expires_at > lease.expires_at
    if harness.fake_time:
        assert extended.expires_at == pytest.approx(before + 100.0, abs=1e-3)
    # The original lease object stays valid: fencing is by token, not by expiry.
    assert await atransport.ack(lease)


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
