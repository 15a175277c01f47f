"""Pause and resume: an operator hold on one group (the race with claims is in concurrency)."""

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

# -- pause ---------------------------------------------------------------------------------


async def test_pause_holds_a_group_until_resume(atransport: AsyncTransport) -> None:
    await atransport.publish("held", _ev(1))
    await atransport.publish("held", _ev(2))
    await atransport.publish("other", _ev(3))
    assert await atransport.pause("held") is True
    assert await atransport.pause("held") is False
    assert [lease.group_id for lease in await atransport.claim_many(5)] == ["other"]
    assert await atransport.claim() is None
    await atransport.publish("held", _ev(4))  # publishes still append
    info = await atransport.group("held")
    assert info is not None
    assert (info.state, info.depth) == ("paused", 3)
    assert await atransport.resume("held") is True
    assert await atransport.resume("held") is False
    assert [n for _g, n in await _drain(atransport)] == [1, 2, 4]


async def test_resume_of_a_group_that_is_not_paused_is_false(atransport: AsyncTransport) -> None:
    assert await atransport.resume("nobody") is False
    assert await atransport.group("nobody") is None
    await atransport.publish("g", _ev(1))
    assert await atransport.resume("g") is False
    assert (await atransport.stats()).paused == 0
    assert _n(await _claim(atransport)) == 1


async def test_pausing_an_absent_group_creates_it_empty(atransport: AsyncTransport) -> None:
    assert await atransport.pause("tenant-7") is True
    info = await atransport.group("tenant-7")
    assert info is not None
    assert (info.state, info.depth, info.priority) == ("paused", 0, 0)
    assert (info.head_message_id, info.head_enqueued_at, info.head_attempts) == (None, None, 0)
    assert info.last_error is None
    assert [g.group_id for g in await atransport.groups()] == ["tenant-7"]
    stats = await atransport.stats()
    assert (stats.groups, stats.messages, stats.paused) == (1, 0, 1)
    # Messages that arrive are held; the first one sets the group's priority.
    first = await atransport.publish("tenant-7", _ev(1), priority=3)
    await atransport.publish("tenant-7", _ev(2), priority=1)
    assert await atransport.claim() is None
    info = await atransport.group("tenant-7")
    assert info is not None
    assert (info.depth, info.priority, info.head_message_id) == (2, 3, first)
    assert await atransport.resume("tenant-7") is True
    lease = await _claim(atransport, min_priority=3)
    assert (_n(lease), lease.priority) == (1, 3)


async def test_resuming_an_empty_group_removes_it(atransport: AsyncTransport) -> None:
    assert await atransport.pause("x")
    assert await atransport.resume("x")
    assert await atransport.group("x") is None
    assert await atransport.groups() == []
    assert (await atransport.stats()).groups == 0
    assert await atransport.resume("x") is False


async def test_a_lease_out_finishes_normally_while_paused(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.pause("g") is True
    renewed = await atransport.extend(lease, 30.0)
    assert renewed is not None
    assert await atransport.nack(renewed)
    assert await atransport.claim() is None  # the hold is on: the nacked head waits
    assert await atransport.resume("g")
    again = await _claim(atransport)
    assert (_n(again), again.attempt) == (1, 2)
    assert await atransport.pause("g")
    assert await atransport.release(again)
    assert await atransport.resume("g")
    third = await _claim(atransport)
    assert (_n(third), third.attempt) == (1, 2)
    assert await atransport.pause("g")
    assert await atransport.ack(third)
    assert await atransport.claim() is None
    assert await atransport.resume("g")
    last = await _claim(atransport)
    assert await atransport.pause("g")
    if harness.capabilities.dead_letters:
        assert await atransport.dead_letter(last, "while paused")
        assert [d.message_id for d in await atransport.dead_letters()] == [last.message_id]
    else:
        assert await atransport.ack(last)
    # Drained while paused: the group and its hold stay, empty.
    info = await atransport.group("g")
    assert info is not None
    assert (info.state, info.depth, info.head_message_id) == ("paused", 0, None)


async def test_a_drained_paused_group_keeps_its_hold(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1), priority=1)
    lease = await _claim(atransport)
    assert await atransport.pause("g")
    assert await atransport.ack(lease)
    stats = await atransport.stats()
    assert (stats.groups, stats.messages, stats.paused) == (1, 0, 1)
    await atransport.publish("g", _ev(2), priority=4)  # no messages: the publish sets it
    assert await atransport.claim() is None
    info = await atransport.group("g")
    assert info is not None
    assert (info.state, info.depth, info.priority) == ("paused", 1, 4)
    assert await atransport.resume("g")
    back = await _claim(atransport, min_priority=4)
    assert (_n(back), back.priority) == (2, 4)


async def test_a_paused_group_is_not_exhausted(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1)
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    assert await q.nack(await _claim(q))
    assert await q.pause("g")
    assert await q.claim() is None
    assert await q.dead_letters() == []  # a claim passed it by without applying the limit
    info = await q.group("g")
    assert info is not None
    assert (info.state, info.depth, info.head_attempts) == ("paused", 2, 1)
    assert await q.resume("g")
    nxt = await _claim(q)  # now the exhausted head goes, the next one comes
    assert _n(nxt) == 2
    assert [d.attempts for d in await q.dead_letters()] == [1]


async def test_claim_many_skips_paused_groups(atransport: AsyncTransport) -> None:
    for n in range(6):
        await atransport.publish(f"g{n}", _ev(n))
    for n in (1, 3, 4):
        assert await atransport.pause(f"g{n}")
    leases = await atransport.claim_many(10)
    assert sorted(lease.group_id for lease in leases) == ["g0", "g2", "g5"]
    assert await atransport.ack_many(leases) == [True] * 3
    assert await atransport.claim_many(10) == []
    assert [g.group_id for g in await atransport.groups(state="paused")] == ["g1", "g3", "g4"]


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
