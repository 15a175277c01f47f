"""Exhausted attempts: max_attempts with the dead-letter and the block policy, unblock."""

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

EXHAUSTED_REASON = exhausted_reason(2)
UNBLOCK_DROP_REASON = "dropped by operator (unblock)"


# -- max_attempts --------------------------------------------------------------------------


async def test_max_attempts_dead_letters_and_continues(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=2, on_exhausted="dead_letter")
    await q.publish("g", _ev(1), priority=1)
    await q.publish("g", _ev(2))
    for attempt in (1, 2):
        lease = await _claim(q)
        assert (_n(lease), lease.attempt) == (1, attempt)
        assert await q.nack(lease)
    nxt = await _claim(q)
    assert (_n(nxt), nxt.attempt) == (2, 1)
    [dead] = await q.dead_letters()
    assert dead.group_id == "g"
    assert dead.reason == EXHAUSTED_REASON
    assert dead.attempts == 2
    assert dead.priority == 1
    assert isinstance(dead.event.data, dict)
    assert dead.event.data["n"] == 1
    assert (await q.stats()).dead_letters == 1


async def test_max_attempts_drops_an_emptied_group(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1)
    await q.publish("a", _ev("a"))
    await q.publish("b", _ev("b"))
    lease = await _claim(q)
    assert lease.group_id == "a"
    assert await q.nack(lease)
    nxt = await _claim(q)
    assert nxt.group_id == "b"
    assert await q.ack(nxt)
    assert await q.claim() is None
    stats = await q.stats()
    assert (stats.groups, stats.messages, stats.dead_letters) == (0, 0, 1)


async def test_max_attempts_counts_expired_leases(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    u = harness.unit
    q = await harness.make(max_attempts=2)
    await q.publish("g", _ev(1))
    await _claim(q, u)
    await harness.advance(1.5 * u)
    second = await _claim(q, u)
    assert second.attempt == 2
    await harness.advance(1.5 * u)
    assert await q.claim(u) is None
    assert [d.reason for d in await q.dead_letters()] == [EXHAUSTED_REASON]
    assert await q.ack(second) is False


async def test_max_attempts_block_policy(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    harness.require("global_fairness")  # "g" is claimed first: never served, by group id
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    await q.publish("other", _ev(3))
    lease = await _claim(q)
    assert lease.group_id == "g"
    assert await q.nack(lease)
    nxt = await _claim(q)
    assert nxt.group_id == "other"
    assert await q.ack(nxt)
    assert await q.claim() is None
    stats = await q.stats()
    assert (stats.groups, stats.messages, stats.blocked, stats.dead_letters) == (1, 2, 1, 0)
    assert (stats.in_flight, stats.parked) == (0, 0)
    assert await q.dead_letters() == []
    assert await q.ack(lease) is False


async def test_unblock_retries_the_head(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    assert await q.nack(await _claim(q))
    assert await q.claim() is None
    assert await q.unblock("g") is True
    assert await q.unblock("g") is False
    again = await _claim(q)
    assert (_n(again), again.attempt) == (1, 1)
    assert await q.ack(again)
    assert [n for _g, n in await _drain(q)] == [2]
    assert (await q.stats()).blocked == 0


async def test_unblock_drop_head_dead_letters_it(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    assert await q.nack(await _claim(q))
    assert await q.claim() is None
    assert await q.unblock("g", drop_head=True) is True
    [dead] = await q.dead_letters()
    assert (dead.reason, dead.group_id, dead.attempts) == (UNBLOCK_DROP_REASON, "g", 1)
    assert [n for _g, n in await _drain(q)] == [2]


async def test_unblock_of_unblocked_group_is_false(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    assert await atransport.unblock("nobody") is False
    await atransport.publish("g", _ev())
    assert await atransport.unblock("g") is False
    lease = await _claim(atransport)
    assert await atransport.unblock("g") is False
    assert await atransport.ack(lease)


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
