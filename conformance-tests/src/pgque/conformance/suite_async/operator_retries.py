"""The operator's retries: ``retry_now`` ends a retry delay, ``unblock(head=)`` acts only on
the head the operator looked at, a redrive keeps the group's history and may retry at once."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import _claim, _drain, _ev, _info, _n
from pgque.core import AsyncTransport, InvalidInput

# -- retry_now -----------------------------------------------------------------------------


async def test_retry_now_ends_a_retry_delay_keeping_attempts_and_error(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    first = await _claim(atransport)
    assert await atransport.nack(first, delay=1000 * harness.unit, error="supplier down")
    assert await atransport.claim() is None  # parked
    assert (await _info(atransport, "g")).state == "parked"
    assert await atransport.retry_now("g") is True
    info = await _info(atransport, "g")
    assert info.state == "ready"
    assert info.head_attempts == 1
    assert info.last_error is not None
    assert info.last_error.message == "supplier down"
    again = await _claim(atransport)  # at once, not in 1000 units
    assert (again.message_id, again.attempt) == (first.message_id, 2)
    assert await atransport.retry_now("g") is False  # leased: it waits for no retry
    assert await atransport.ack(again)
    assert [n for _g, n in await _drain(atransport)] == [2]


async def test_retry_now_is_false_for_a_group_waiting_for_no_retry(
    atransport: AsyncTransport,
) -> None:
    assert await atransport.retry_now("nobody") is False
    await atransport.publish("g", _ev(1))
    assert await atransport.retry_now("g") is False  # ready
    lease = await _claim(atransport)
    assert await atransport.retry_now("g") is False  # leased
    assert await atransport.nack(lease, delay=0)
    assert await atransport.retry_now("g") is False  # claimable already
    with pytest.raises(InvalidInput):
        await atransport.retry_now("")


async def test_retry_now_is_false_for_a_blocked_group(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    assert await q.nack(await _claim(q))
    assert await q.claim() is None  # the exhausted head blocks its group
    assert await q.retry_now("g") is False  # blocked: unblock is the operator's action
    assert (await _info(q, "g")).state == "blocked"


async def test_retry_now_keeps_a_pause(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), delay=1000 * harness.unit)
    assert await atransport.pause("g")
    assert await atransport.retry_now("g") is True
    assert await atransport.claim() is None  # still paused
    assert await atransport.resume("g")
    again = await _claim(atransport)  # no delay left once resumed
    assert (_n(again), again.attempt) == (1, 2)


# -- unblock(head=) ------------------------------------------------------------------------


async def test_unblock_with_head_acts_only_on_that_head(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    head = await q.publish("g", _ev(1))
    later = await q.publish("g", _ev(2))
    assert await q.nack(await _claim(q))
    assert await q.claim() is None
    assert (await _info(q, "g")).head_message_id == head
    assert await q.unblock("g", head=later) is False  # not its head: nothing changes
    assert (await _info(q, "g")).state == "blocked"
    assert await q.unblock("g", drop_head=True, head=later) is False
    assert await q.dead_letters() == []
    assert await q.unblock("g", head=head) is True
    again = await _claim(q)
    assert (again.message_id, again.attempt) == (head, 1)
    with pytest.raises(InvalidInput):
        await q.unblock("g", head=0)


# -- redrive -------------------------------------------------------------------------------


async def test_redrive_keeps_the_dead_letters_error_as_the_last_error(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1))
    assert await atransport.dead_letter(await _claim(atransport), "bad", error="no such sku")
    assert await atransport.redrive() == 1
    info = await _info(atransport, "g")
    assert info.head_attempts == 0
    assert info.last_error is not None
    assert info.last_error.message == "no such sku"


async def test_redrive_into_a_parked_group_waits_unless_retry_now(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    """The redriven message goes to the head of a group waiting out another message's retry
    delay: it waits with the group, or, with ``retry_now=True``, the group is claimable at
    once and the redriven message runs first."""
    harness.require("dead_letters")
    for n in (1, 2, 3):
        await atransport.publish("g", _ev(n))
    assert await atransport.dead_letter(await _claim(atransport), "bad", error="first")
    second = await _claim(atransport)
    assert await atransport.nack(second, delay=1000 * harness.unit, error="second")
    [dead] = await atransport.dead_letters()
    assert await atransport.redrive([dead.id]) == 1
    assert await atransport.claim() is None  # still waiting out the delay
    info = await _info(atransport, "g")
    assert (info.state, info.head_message_id) == ("parked", dead.message_id)
    assert info.last_error is not None
    assert info.last_error.message == "first"  # the redriven head's own error
    assert await atransport.retry_now("g") is True
    redriven = await _claim(atransport)
    assert (redriven.message_id, _n(redriven)) == (dead.message_id, 1)


async def test_redrive_with_retry_now_makes_a_parked_group_claimable(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    for n in (1, 2):
        await atransport.publish("g", _ev(n))
    assert await atransport.dead_letter(await _claim(atransport), "bad")
    assert await atransport.nack(await _claim(atransport), delay=1000 * harness.unit)
    assert await atransport.redrive(retry_now=True) == 1
    order = [n for _g, n in await _drain(atransport)]
    assert order == [1, 2]  # at once, the redriven message first, then the nacked one


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
