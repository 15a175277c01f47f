"""Redrive in place: a dead letter returns to its group under its original id, in order."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _n,
)
from pgque.core import AsyncTransport, Lease

# -- helpers -------------------------------------------------------------------------------


async def _bury(transport: AsyncTransport, want: int | str) -> Lease:
    """Claim the next message (it must be *want*) and dead-letter it."""
    lease = await _claim(transport)
    assert _n(lease) == want
    assert await transport.dead_letter(lease, f"failed {want}", error=f"error {want}")
    return lease


# -- ordered redrive -----------------------------------------------------------------------


async def test_redrive_goes_ahead_of_later_messages(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    ids = [await atransport.publish("g", _ev(n)) for n in (1, 2, 3)]
    buried = await _bury(atransport, 1)
    assert await atransport.redrive() == 1
    assert await atransport.dead_letters() == []
    assert (await atransport.stats()).dead_letters == 0
    info = await atransport.group("g")
    assert info is not None
    assert (info.depth, info.head_message_id, info.head_attempts) == (3, ids[0], 0)
    # a fresh attempt count; the group keeps its history: the dead letter's error
    assert info.last_error is not None
    assert info.last_error.message == "error 1"
    back = await _claim(atransport)
    assert (back.message_id, back.event, back.attempt) == (ids[0], buried.event, 1)
    assert await atransport.ack(back)
    assert [n for _g, n in await _drain(atransport)] == [2, 3]


async def test_several_dead_letters_of_a_group_return_in_id_order(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("global_fairness")
    harness.require("dead_letters")
    for n in range(1, 7):
        await atransport.publish("g", _ev(n))
    await atransport.publish("other", _ev("o"))
    await _bury(atransport, 1)
    assert _n(await _claim(atransport)) == "o"  # round-robin: the other group's turn
    await _bury(atransport, 2)
    assert await atransport.ack(await _claim(atransport))  # 3 done
    await _bury(atransport, 4)
    dead = await atransport.dead_letters()
    assert [d.event.data for d in dead] == [{"n": 1}, {"n": 2}, {"n": 4}]
    # Asked for newest first, one by one: they still return in message id order.
    assert await atransport.redrive([dead[2].id]) == 1
    assert await atransport.redrive([dead[0].id, dead[1].id]) == 2
    assert [n for _g, n in await _drain(atransport)] == [1, 2, 4, 5, 6]


async def test_a_lease_in_flight_finishes_first(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    ids = [await atransport.publish("g", _ev(n)) for n in (1, 2, 3)]
    await _bury(atransport, 1)
    in_flight = await _claim(atransport)
    assert _n(in_flight) == 2
    assert await atransport.redrive() == 1
    assert await atransport.claim() is None  # the group is still leased
    info = await atransport.group("g")
    assert info is not None
    assert (info.state, info.depth, info.head_message_id) == ("leased", 3, ids[0])
    renewed = await atransport.extend(in_flight, 60.0)
    assert renewed is not None
    assert await atransport.ack(renewed)  # the lease acts on its own message
    back = await _claim(atransport)
    assert (back.message_id, back.attempt) == (ids[0], 1)
    assert await atransport.ack(back)
    assert [n for _g, n in await _drain(atransport)] == [3]


async def test_a_lease_in_flight_given_back_comes_after_the_redriven(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    for n in (1, 2, 3, 4):
        await atransport.publish("g", _ev(n))
    await _bury(atransport, 1)
    nacked = await _claim(atransport)
    assert _n(nacked) == 2
    assert await atransport.redrive() == 1
    assert await atransport.nack(nacked, error="retry me")
    first = await _claim(atransport)
    assert (_n(first), first.attempt) == (1, 1)
    assert await atransport.release(first)
    again = await _claim(atransport)
    assert (_n(again), again.attempt) == (1, 1)
    assert await atransport.ack(again)
    second = await _claim(atransport)
    assert (_n(second), second.attempt) == (2, 2)
    assert await atransport.dead_letter(second, "gives up")
    assert [n for _g, n in await _drain(atransport)] == [3, 4]
    [dead] = await atransport.dead_letters()
    assert dead.error is not None
    assert dead.error.message == "retry me"


async def test_redrive_recreates_a_group_that_is_gone(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    message_id = await atransport.publish("g", _ev(1), priority=3)
    lease = await _claim(atransport)
    assert await atransport.nack(lease, error="once")
    await _bury(atransport, 1)
    assert await atransport.group("g") is None
    [dead] = await atransport.dead_letters()
    assert (dead.attempts, dead.priority, dead.message_id) == (2, 3, message_id)
    assert await atransport.redrive([dead.id]) == 1
    info = await atransport.group("g")
    assert info is not None
    assert (info.state, info.depth, info.priority, info.head_message_id) == (
        "ready",
        1,
        3,
        message_id,
    )
    assert info.head_attempts == 0
    assert info.last_error is not None
    assert info.last_error.message == "error 1"
    back = await _claim(atransport, min_priority=3)
    assert (back.message_id, back.priority, back.attempt) == (message_id, 3, 1)


async def test_redrive_keeps_the_priority_of_a_group_that_exists(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1), priority=3)
    await _bury(atransport, 1)
    await atransport.publish("g", _ev(2), priority=1)  # a new group, priority 1
    assert await atransport.redrive() == 1
    info = await atransport.group("g")
    assert info is not None
    assert (info.priority, info.depth) == (1, 2)
    assert await atransport.claim(min_priority=2) is None
    back = await _claim(atransport)
    assert (_n(back), back.priority) == (1, 1)


async def test_redrive_keeps_a_hold_on_the_group(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    await _bury(atransport, 1)
    assert await atransport.pause("g")
    assert await atransport.redrive() == 1
    assert await atransport.claim() is None
    info = await atransport.group("g")
    assert info is not None
    assert (info.state, info.depth) == ("paused", 2)
    assert await atransport.resume("g")
    assert [n for _g, n in await _drain(atransport)] == [1, 2]


async def test_redrive_into_a_paused_empty_group(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1), priority=2)
    await _bury(atransport, 1)
    assert await atransport.pause("g")  # creates it, empty, priority 0
    assert await atransport.redrive() == 1
    info = await atransport.group("g")
    assert info is not None
    assert (info.state, info.depth, info.priority) == ("paused", 1, 0)
    assert await atransport.resume("g")
    assert (await _claim(atransport)).priority == 0


async def test_redrive_keeps_a_group_blocked(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    ids = [await q.publish("g", _ev(n)) for n in (1, 2, 3)]
    await _bury(q, 1)
    assert await q.nack(await _claim(q))
    assert await q.claim() is None  # 2 is exhausted: the group blocks
    assert await q.redrive() == 1
    assert await q.claim() is None
    info = await q.group("g")
    assert info is not None
    assert (info.state, info.depth, info.head_message_id) == ("blocked", 3, ids[0])
    # unblock acts on the head, which is now the redriven message.
    assert await q.unblock("g")
    back = await _claim(q)
    assert (back.message_id, back.attempt) == (ids[0], 1)
    assert await q.ack(back)
    assert await q.claim() is None  # 2 is still exhausted
    assert await q.unblock("g")
    assert [n for _g, n in await _drain(q)] == [2, 3]


async def test_redrive_at_the_tail_takes_a_new_id(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    ids = [await atransport.publish("g", _ev(n)) for n in (1, 2)]
    await _bury(atransport, 1)
    assert await atransport.redrive(in_place=False) == 1
    assert await atransport.dead_letters() == []
    second = await _claim(atransport)
    assert (_n(second), second.message_id) == (2, ids[1])
    assert await atransport.ack(second)
    tail = await _claim(atransport)
    assert _n(tail) == 1
    assert tail.message_id > ids[1]
    assert tail.attempt == 1


async def test_redrive_in_place_across_groups(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    for n in range(4):
        await atransport.publish(f"g{n}", _ev(f"{n}a"))
        await atransport.publish(f"g{n}", _ev(f"{n}b"))
    for lease in await atransport.claim_many(4):
        assert await atransport.dead_letter(lease, "x")
    dead = await atransport.dead_letters()
    assert await atransport.redrive([dead[1].id, dead[3].id]) == 2
    assert await atransport.redrive([dead[1].id]) == 0  # gone from the dead letters
    drained = await _drain(atransport)
    by_group: dict[str, list[str]] = {}
    for group_id, n in drained:
        by_group.setdefault(group_id, []).append(n)
    redriven = {dead[1].group_id, dead[3].group_id}
    for group_id, got in by_group.items():
        k = group_id[1:]
        assert got == ([f"{k}a", f"{k}b"] if group_id in redriven else [f"{k}b"])
    assert len(await atransport.dead_letters()) == 2


# -- listing and deleting ------------------------------------------------------------------


async def test_dead_letters_page_by_id(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    harness.require("dead_letters")
    for n in range(5):
        await atransport.publish(f"g{n}", _ev(n))
    for _ in range(5):
        assert await atransport.dead_letter(await _claim(atransport), "x")
    every = await atransport.dead_letters()
    ids = [d.id for d in every]
    assert ids == sorted(ids)
    assert await atransport.dead_letters(2) == every[:2]
    assert await atransport.dead_letters(2, after=ids[1]) == every[2:4]
    assert await atransport.dead_letters(after=ids[3]) == every[4:]
    assert await atransport.dead_letters(after=ids[4]) == []
    assert await atransport.dead_letters(after=0) == every
    assert await atransport.dead_letters(after=-5) == every
    paged = []
    after: int | None = None
    while page := await atransport.dead_letters(1, after=after):
        paged += page
        after = page[-1].id
    assert paged == every


async def test_delete_dead_letters(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    harness.require("dead_letters")
    for n in range(4):
        await atransport.publish(f"g{n}", _ev(n))
    for _ in range(4):
        assert await atransport.dead_letter(await _claim(atransport), "x")
    ids = [d.id for d in await atransport.dead_letters()]
    unknown = max(ids) + 1000
    assert await atransport.delete_dead_letters([ids[1], ids[3], unknown]) == 2
    assert [d.id for d in await atransport.dead_letters()] == [ids[0], ids[2]]
    assert await atransport.delete_dead_letters([ids[1]]) == 0
    assert await atransport.delete_dead_letters([]) == 0
    assert await atransport.delete_dead_letters([ids[0], ids[0]]) == 1
    assert (await atransport.stats()).dead_letters == 1
    assert await atransport.redrive([ids[0], ids[1], ids[3]]) == 0
    assert await atransport.redrive() == 1
    assert await atransport.claim() is not None
    assert await atransport.claim() is None


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
