"""Stats: every state counted, the age of the oldest message, expired leases."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _ev,
)
from pgque.core import AsyncTransport

# -- stats ---------------------------------------------------------------------------------


async def test_stats_counts_every_state(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    u = harness.unit
    q = await harness.make(max_attempts=1, on_exhausted="block")
    t0 = harness.now()
    await q.publish_many([("flight", _ev(1)), ("flight", _ev(2)), ("park", _ev(3))])
    await q.publish_many([("block", _ev(4)), ("idle", _ev(5)), ("dead", _ev(6))])
    await harness.advance(0.5 * u)
    got = {lease.group_id: lease for lease in await q.claim_many(10, 10 * u)}
    assert set(got) == {"flight", "park", "block", "idle", "dead"}
    assert await q.nack(got["park"], delay=5 * u)
    assert await q.nack(got["block"])
    assert await q.ack(got["idle"])
    assert await q.dead_letter(got["dead"], "bad")
    assert await q.claim() is None  # blocks "block" (its head is exhausted)
    stats = await q.stats()
    assert stats.groups == 3
    assert stats.messages == 4
    assert stats.in_flight == 1
    assert stats.parked == 1
    assert stats.blocked == 1
    assert stats.dead_letters == 1
    assert stats.oldest_age_s is not None
    assert stats.next_resume_at is not None
    if harness.fake_time:
        assert stats.oldest_age_s == pytest.approx(harness.now() - t0, abs=1e-3)
        assert stats.next_resume_at == pytest.approx(t0 + 5.5 * u, abs=1e-3)
    else:
        assert stats.oldest_age_s >= 0.0


async def test_stats_age_grows_with_time(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    await atransport.publish("g", _ev())
    first = (await atransport.stats()).oldest_age_s
    assert first is not None
    await harness.advance(harness.unit)
    later = (await atransport.stats()).oldest_age_s
    assert later is not None
    assert later >= first + 0.9 * harness.unit


async def test_expired_lease_is_not_counted_in_flight(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev())
    await _claim(atransport, harness.unit)
    assert (await atransport.stats()).in_flight == 1
    await harness.advance(1.5 * harness.unit)
    stats = await atransport.stats()
    assert (stats.in_flight, stats.parked, stats.groups) == (0, 0, 1)


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
