"""Release: a message given back for redelivery at once, without counting the attempt."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _n,
)
from pgque.core import AsyncTransport
from pgque.core.validation import exhausted_reason

# -- release -------------------------------------------------------------------------------


async def test_release_does_not_count_the_attempt(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    first = await _claim(atransport, holder="shutting-down")
    assert first.attempt == 1
    assert await atransport.release(first) is True
    info = await atransport.group("g")
    assert info is not None
    assert (info.state, info.head_attempts, info.lease_holder) == ("ready", 0, None)
    stats = await atransport.stats()
    assert (stats.in_flight, stats.parked) == (0, 0)
    again = await _claim(atransport)  # at once: no delay
    assert (again.message_id, again.attempt) == (first.message_id, 1)
    assert again.token != first.token
    assert await atransport.ack(again)
    assert [n for _g, n in await _drain(atransport)] == [2]


async def test_release_is_fenced_like_ack(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport)
    assert await atransport.release(lease) is True
    assert await atransport.release(lease) is False  # no longer held
    assert await atransport.ack(lease) is False
    short = await _claim(atransport, u)
    await harness.advance(2 * u)
    taker = await _claim(atransport)  # the expired lease is taken over
    assert await atransport.release(short) is False
    forged = taker.model_copy(update={"token": "0" * len(taker.token)})
    assert await atransport.release(forged) is False
    assert taker.attempt == 2  # the late release gave nothing back
    assert await atransport.release(taker) is True
    assert (await _claim(atransport)).attempt == 2


async def test_releases_never_exhaust_a_head(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1)
    await q.publish("g", _ev(1))
    for _ in range(5):
        lease = await _claim(q)
        assert lease.attempt == 1
        assert await q.release(lease)
    assert await q.dead_letters() == []
    assert await q.nack(await _claim(q))  # a counted failure uses the one attempt
    assert await q.claim() is None
    [dead] = await q.dead_letters()
    assert (dead.reason, dead.attempts) == (exhausted_reason(1), 1)


async def test_release_keeps_the_last_error(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error="first failure")
    second = await _claim(atransport)
    assert second.attempt == 2
    assert await atransport.release(second)
    info = await atransport.group("g")
    assert info is not None
    assert info.head_attempts == 1
    assert info.last_error is not None
    assert info.last_error.message == "first failure"
    assert (await _claim(atransport)).attempt == 2


async def test_release_lets_other_groups_go_first(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    """A released group counts as served now (round-robin), as a nack without delay does."""
    await atransport.publish("a", _ev("a1"))
    await atransport.publish("b", _ev("b1"))
    await atransport.publish("b", _ev("b2"))
    first = await _claim(atransport)
    assert first.group_id == "a"
    served = await _claim(atransport)
    assert await atransport.ack(served)  # b served now
    await harness.advance(0.1 * harness.unit)
    assert await atransport.release(first)  # a served later still
    assert _n(await _claim(atransport)) == "b2"
    assert _n(await _claim(atransport)) == "a1"


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
