"""Parking: nack with and without a delay."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _n,
)
from pgque.core import AsyncTransport

# -- nack ----------------------------------------------------------------------------------


async def test_nack_zero_redelivers_at_once(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    first = await _claim(atransport)
    assert await atransport.nack(first, delay=0)
    again = await _claim(atransport)
    assert again.message_id == first.message_id
    assert again.token != first.token
    assert again.attempt == first.attempt + 1
    stats = await atransport.stats()
    assert (stats.messages, stats.parked) == (2, 0)
    assert await atransport.ack(again)
    assert [n for _g, n in await _drain(atransport)] == [2]


async def test_nack_delay_parks_the_whole_group(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish("parked", _ev(1))
    await atransport.publish("parked", _ev(2))
    await atransport.publish("other", _ev(3))
    got = {lease.group_id: lease for lease in await atransport.claim_many(5)}
    assert set(got) == {"parked", "other"}
    lease = got["parked"]
    assert await atransport.nack(lease, delay=2 * u)
    assert await atransport.ack(got["other"])
    await atransport.publish("other", _ev(4))
    assert _n(await _claim(atransport)) == 4  # other groups go on while one is parked
    assert await atransport.claim() is None
    await harness.advance(u)
    assert await atransport.claim() is None
    await harness.advance(1.5 * u)
    back = await _claim(atransport)
    assert back.message_id == lease.message_id
    assert back.attempt == 2
    assert _n(back) == 1


async def test_nack_delay_shows_in_stats(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    await atransport.publish("g", _ev())
    lease = await _claim(atransport)
    before = harness.now()
    assert await atransport.nack(lease, delay=5 * harness.unit)
    stats = await atransport.stats()
    assert (stats.groups, stats.in_flight, stats.parked, stats.blocked) == (1, 0, 1, 0)
    assert stats.next_resume_at is not None
    if harness.fake_time:
        assert stats.next_resume_at == pytest.approx(before + 5 * harness.unit, abs=1e-3)
    else:
        assert stats.next_resume_at > before


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
