"""Scheduling: delayed publish, cancel, the scheduled listing, ticks, wake-ups at due times.

Gated on ``Capabilities.scheduling``. A scheduled message (``delay > 0``) is invisible until its
due time, when it joins its group's tail (as if published then, with its own priority and id);
messages falling due join in ``(due_at, id)`` order. Every call behaves as if each due message
had joined already, however lazily a backend moves them in.
"""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import time
from datetime import datetime

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _n,
)
from pgque.core import AsyncSupportsPurge, AsyncSupportsWakeups, AsyncTransport, InvalidInput
from pgque.core.scheduling import TICK_HEADER, AsyncScheduler, Schedule, ScheduleEntry

# -- helpers -------------------------------------------------------------------------------


async def _scheduling(harness: AsyncHarness) -> AsyncTransport:
    """Open the test's transport; skip unless it declares ``scheduling``."""
    transport = await harness.open()
    harness.require("scheduling")
    return transport


def _near(harness: AsyncHarness, value: float | None, expected: float) -> bool:
    """Whether *value* is *expected* (exactly enough on a fake clock, roughly on a real one)."""
    assert value is not None
    if harness.fake_time:
        return abs(value - expected) <= 1e-3
    return abs(value - expected) <= harness.unit


# -- invisible until due -------------------------------------------------------------------


async def test_a_delayed_message_is_invisible_until_due(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    t0 = harness.now()
    scheduled_id = await t.publish("g", _ev(1), delay=2 * u)
    assert isinstance(scheduled_id, int)
    assert await t.claim() is None
    assert await t.claim_many(5) == []
    assert await t.group("g") is None  # a group with only scheduled messages does not exist
    assert await t.groups() == []
    stats = await t.stats()
    assert (stats.groups, stats.messages, stats.in_flight, stats.scheduled) == (0, 0, 0, 1)
    assert stats.oldest_age_s is None
    assert _near(harness, stats.next_due_at, t0 + 2 * u)
    await harness.advance(u)
    assert await t.claim() is None
    assert (await t.stats()).scheduled == 1
    await harness.advance(1.5 * u)
    # Due: every read counts it as a message of its group before any claim moved it in.
    stats = await t.stats()
    assert (stats.groups, stats.messages, stats.scheduled, stats.next_due_at) == (1, 1, 0, None)
    info = await t.group("g")
    assert info is not None
    assert (info.state, info.depth, info.head_message_id) == ("ready", 1, scheduled_id)
    assert [g.group_id for g in await t.groups()] == ["g"]
    assert await t.scheduled() == []
    lease = await _claim(t)
    assert (lease.group_id, lease.message_id, _n(lease), lease.attempt) == ("g", scheduled_id, 1, 1)
    assert await t.ack(lease)
    assert await t.claim() is None
    stats = await t.stats()
    assert (stats.groups, stats.messages, stats.scheduled) == (0, 0, 0)


async def test_a_delay_of_zero_is_an_ordinary_publish(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    first = await t.publish("g", _ev(1), delay=0)
    ids = await t.publish_many([("g", _ev(2)), ("h", _ev(3))], delay=0.0)
    stats = await t.stats()
    assert (stats.messages, stats.scheduled, stats.next_due_at) == (3, 0, None)
    assert await t.scheduled() == []
    assert await t.cancel(first) is False
    assert sorted(await _drain(t)) == [("g", 1), ("g", 2), ("h", 3)]
    assert first < ids[0] < ids[1]


async def test_scheduled_ids_share_the_sequence_of_ordinary_ones(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    a = await t.publish("g", _ev(1))
    s = await t.publish("g", _ev(2), delay=u)
    b = await t.publish("h", _ev(3))
    [m, n] = await t.publish_many([("g", _ev(4)), ("h", _ev(5))], delay=u)
    c = await t.publish("g", _ev(6))
    assert a < s < b < m < n < c


async def test_a_scheduled_message_does_not_hold_up_its_group(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    await t.publish("g", _ev("S"), delay=5 * u)
    await t.publish("g", _ev("A"))
    await t.publish("g", _ev("B"))
    info = await t.group("g")
    assert info is not None
    assert info.depth == 2  # the scheduled one is not in the group's depth
    assert await _drain(t) == [("g", "A"), ("g", "B")]
    assert await t.group("g") is None
    stats = await t.stats()
    assert (stats.groups, stats.messages, stats.scheduled) == (0, 0, 1)


# -- joining at due time -------------------------------------------------------------------


async def test_a_due_message_joins_its_group_tail(harness: AsyncHarness) -> None:
    """The worked example: S (delay 2u) at 0, A at u, B at 2.5u: claims give A, S, B."""
    t = await _scheduling(harness)
    u = harness.unit
    t0 = harness.now()
    s = await t.publish("g", _ev("S"), delay=2 * u)
    await harness.advance(u)
    a = await t.publish("g", _ev("A"))
    await harness.advance(1.5 * u)
    b = await t.publish("g", _ev("B"))
    info = await t.group("g")
    assert info is not None
    assert (info.depth, info.head_message_id) == (3, a)
    first = await _claim(t)
    assert (first.message_id, _n(first)) == (a, "A")
    assert await t.claim() is None  # one at a time per group, as ever
    assert await t.ack(first)
    info = await t.group("g")
    assert info is not None
    assert info.head_message_id == s
    assert _near(harness, info.head_enqueued_at, t0 + 2 * u)  # enqueued at its due time
    second = await _claim(t)
    assert (second.message_id, _n(second)) == (s, "S")
    assert await t.ack(second)
    third = await _claim(t)
    assert (third.message_id, _n(third)) == (b, "B")
    assert await t.ack(third)
    assert await t.claim() is None


async def test_a_due_message_joins_before_a_later_claim_of_its_group(
    harness: AsyncHarness,
) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    await t.publish("g", _ev("A"))
    await t.publish("g", _ev("S"), delay=u)
    lease = await _claim(t)
    assert _n(lease) == "A"
    await harness.advance(1.5 * u)
    await t.publish("g", _ev("B"))  # appends after the due S, though A is still leased
    assert await t.ack(lease)
    assert await _drain(t) == [("g", "S"), ("g", "B")]


async def test_a_redrive_sees_due_messages_joined_first(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    harness.require("dead_letters")
    u = harness.unit
    await t.publish("tail", _ev("A"))
    await t.publish("place", _ev("B"))
    for lease in await t.claim_many(2):
        assert await t.dead_letter(lease, "later")
    await t.publish("tail", _ev("S1"), delay=u)
    await t.publish("place", _ev("S2"), delay=u)
    await harness.advance(1.5 * u)
    [a, b] = sorted(await t.dead_letters(), key=lambda d: d.group_id)
    assert (a.group_id, b.group_id) == ("place", "tail")
    # At the tail: after the due message. In place: back at its old place, ahead of it.
    assert await t.redrive([b.id], in_place=False) == 1
    assert await t.redrive([a.id], in_place=True) == 1
    drained = await _drain(t)
    assert [n for g, n in drained if g == "tail"] == ["S1", "A"]
    assert [n for g, n in drained if g == "place"] == ["B", "S2"]


async def test_a_group_a_due_message_made_keeps_its_priority_through_an_in_place_redrive(
    harness: AsyncHarness,
) -> None:
    """The group's only message is dead-lettered; a message scheduled into it with priority 4
    falls due and makes the group anew (priority 4) before the in-place redrive puts the dead
    letter (priority 0) back ahead of it: the group keeps priority 4."""
    t = await _scheduling(harness)
    harness.require("dead_letters")
    harness.require("priorities")
    u = harness.unit
    a = await t.publish("g", _ev("A"))
    assert await t.dead_letter(await _claim(t), "later")
    s = await t.publish("g", _ev("S"), priority=4, delay=u)
    await harness.advance(1.5 * u)
    assert await t.redrive(None, in_place=True) == 1
    info = await t.group("g")
    assert info is not None
    assert (info.priority, info.depth, info.head_message_id) == (4, 2, a)
    lease = await _claim(t, min_priority=4)
    assert (lease.message_id, lease.priority) == (a, 4)
    assert await t.ack(lease)
    lease = await _claim(t)
    assert lease.message_id == s


async def test_a_delayed_message_redriven_in_place_goes_back_at_its_joined_place(
    harness: AsyncHarness,
) -> None:
    """S, published (delayed) before A, joined behind A at its due time: its place is the
    joined one, not its id. Dead-lettered and redriven in place with A, it comes back behind A
    and ahead of every message published after it joined."""
    t = await _scheduling(harness)
    harness.require("dead_letters")
    u = harness.unit
    s = await t.publish("g", _ev("S"), delay=u)
    a = await t.publish("g", _ev("A"))
    assert s < a
    await harness.advance(1.5 * u)
    await t.publish("g", _ev("B"))  # after S joined
    lease = await _claim(t)
    assert (lease.message_id, _n(lease)) == (a, "A")
    assert await t.dead_letter(lease, "later")
    lease = await _claim(t)
    assert (lease.message_id, _n(lease)) == (s, "S")
    assert await t.dead_letter(lease, "later")
    await t.publish("g", _ev("C"))
    ids = [d.id for d in await t.dead_letters()]
    assert await t.redrive(list(reversed(ids)), in_place=True) == 2
    info = await t.group("g")
    assert info is not None
    assert (info.depth, info.head_message_id) == (4, a)
    lease = await _claim(t)
    assert (lease.message_id, lease.attempt) == (a, 1)
    assert await t.ack(lease)
    lease = await _claim(t)
    assert (lease.message_id, _n(lease), lease.attempt) == (s, "S", 1)
    assert await t.ack(lease)
    assert await _drain(t) == [("g", "B"), ("g", "C")]


async def test_messages_due_together_join_in_publish_order(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    ids = await t.publish_many([("g", _ev(1)), ("h", _ev(2)), ("g", _ev(3))], delay=u)
    ids.append(await t.publish("g", _ev(4), delay=u))
    await harness.advance(1.5 * u)
    drained = await _drain(t)
    assert [n for g, n in drained if g == "g"] == [1, 3, 4]
    assert [n for g, n in drained if g == "h"] == [2]
    assert ids == sorted(ids)


async def test_messages_join_in_due_order_not_publish_order(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    late = await t.publish("g", _ev("late"), delay=3 * u)
    soon = await t.publish("g", _ev("soon"), delay=u)
    assert late < soon
    await harness.advance(2 * u)
    await t.publish("g", _ev("between"))
    await harness.advance(2 * u)
    assert await _drain(t) == [("g", "soon"), ("g", "between"), ("g", "late")]


async def test_publish_many_with_a_delay_is_one_atomic_schedule(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    t0 = harness.now()
    ids = await t.publish_many([("g1", _ev(1)), ("g2", _ev(2)), ("g1", _ev(3))], delay=2 * u)
    assert len(ids) == 3
    if harness.capabilities.global_id_order:
        assert ids == sorted(ids)
    assert ids[0] < ids[2]  # within a group, always
    assert len(set(ids)) == 3
    listed = await t.scheduled()
    in_id_order = sorted(zip(ids, ["g1", "g2", "g1"], strict=True))
    assert [(m.id, m.group_id) for m in listed] == in_id_order
    if harness.capabilities.atomic_batches:
        assert len({m.due_at for m in listed}) == 1  # one due time for the whole batch
    assert all(_near(harness, m.due_at, t0 + 2 * u) for m in listed)
    stats = await t.stats()
    assert (stats.messages, stats.scheduled) == (0, 3)
    # All or none: a batch with one bad item schedules nothing.
    with pytest.raises(InvalidInput):
        await t.publish_many([("g1", _ev(4)), ("", _ev(5))], delay=u)
    assert [m.id for m in await t.scheduled()] == sorted(ids)
    assert (await t.stats()).scheduled == 3
    await harness.advance(2.5 * u)
    leases = await t.claim_many(5)
    assert sorted((lease.group_id, lease.message_id) for lease in leases) == [
        ("g1", ids[0]),
        ("g2", ids[1]),
    ]
    assert await t.ack_many(leases) == [True, True]
    last = await _claim(t)
    assert (last.group_id, last.message_id, _n(last)) == ("g1", ids[2], 3)


async def test_priority_is_applied_when_the_message_falls_due(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    # The group has messages of priority 1 at publish time but is drained by the due time:
    # the due message creates the group anew, with its own priority.
    await t.publish("g", _ev("A"), priority=1)
    s = await t.publish("g", _ev("S"), priority=4, delay=u)
    first = await _claim(t)
    assert (_n(first), first.priority) == ("A", 1)
    assert await t.ack(first)
    assert await t.claim(min_priority=4) is None
    await harness.advance(1.5 * u)
    info = await t.group("g")
    assert info is not None
    assert info.priority == 4
    lease = await _claim(t, min_priority=4)
    assert (lease.message_id, lease.priority) == (s, 4)
    assert await t.ack(lease)
    # Into a group that has messages at due time: the group's priority stays.
    await t.publish("h", _ev("S2"), priority=4, delay=u)
    await t.publish("h", _ev("B"), priority=1)
    await harness.advance(1.5 * u)
    info = await t.group("h")
    assert info is not None
    assert (info.depth, info.priority) == (2, 1)
    assert await t.claim(min_priority=2) is None
    assert await _drain(t) == [("h", "B"), ("h", "S2")]


async def test_a_message_due_while_its_group_is_leased_keeps_the_group_priority(
    harness: AsyncHarness,
) -> None:
    """Due while the group's only message is leased: it joins a group that has messages, so
    the group keeps its priority when that lease is acked after the due time."""
    t = await _scheduling(harness)
    u = harness.unit
    await t.publish("g", _ev("A"), priority=0)
    first = await _claim(t, 10 * u)
    await t.publish("g", _ev("S"), priority=3, delay=u)
    await harness.advance(1.5 * u)
    assert await t.ack(first)
    info = await t.group("g")
    assert info is not None
    assert (info.depth, info.priority) == (1, 0)
    assert await t.claim(min_priority=1) is None
    lease = await _claim(t)
    assert (_n(lease), lease.priority) == ("S", 0)
    assert await t.ack(lease)


async def test_a_paused_group_receives_a_due_message(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    assert await t.pause("g")
    s = await t.publish("g", _ev("S"), priority=2, delay=u)
    info = await t.group("g")
    assert info is not None
    assert (info.state, info.depth) == ("paused", 0)
    await harness.advance(1.5 * u)
    info = await t.group("g")
    assert info is not None
    assert (info.state, info.depth, info.head_message_id, info.priority) == ("paused", 1, s, 2)
    assert await t.claim() is None
    stats = await t.stats()
    assert (stats.messages, stats.scheduled, stats.paused) == (1, 0, 1)
    assert await t.resume("g")
    lease = await _claim(t)
    assert (lease.message_id, lease.priority) == (s, 2)


async def test_a_resume_sees_a_message_that_fell_due_while_paused(harness: AsyncHarness) -> None:
    """Group b was served, paused, and emptied; a message scheduled into it falls due while it
    is paused. Resumed without anything having looked at it, b holds that message (it joined
    at its due time) and keeps its place in the round-robin: c, never served, goes first.
    (PostgreSQL took b for empty at the resume and removed it: the message then made b anew,
    ahead of c; found by the model-agreement program.)"""
    t = await _scheduling(harness)
    u = harness.unit
    await t.publish("b", _ev(1))
    served = await _claim(t)
    assert served.group_id == "b"
    await t.publish("c", _ev(2))
    assert await t.pause("b")
    assert await t.ack(served)  # b: paused and empty
    due = await t.publish("b", _ev(3), delay=u)
    await harness.advance(1.5 * u)
    assert await t.resume("b")
    first, second = await _claim(t), await _claim(t)
    by_group = {first.group_id: first, second.group_id: second}
    assert by_group["b"].message_id == due
    if harness.capabilities.global_fairness:  # round-robin across every group
        assert (first.group_id, second.group_id) == ("c", "b")


async def test_stats_count_a_due_message_from_its_due_time(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    t0 = harness.now()
    await t.publish("g", _ev(1), delay=u)
    await t.publish("h", _ev(2), delay=3 * u)
    stats = await t.stats()
    assert (stats.messages, stats.scheduled) == (0, 2)
    assert _near(harness, stats.next_due_at, t0 + u)
    await harness.advance(2 * u)
    stats = await t.stats()
    assert (stats.groups, stats.messages, stats.scheduled) == (1, 1, 1)
    assert _near(harness, stats.next_due_at, t0 + 3 * u)
    assert stats.oldest_age_s is not None
    assert _near(harness, stats.oldest_age_s, u)  # its age counts from its due time
    await harness.advance(2 * u)
    stats = await t.stats()
    assert (stats.groups, stats.messages, stats.scheduled, stats.next_due_at) == (2, 2, 0, None)


# -- cancel --------------------------------------------------------------------------------


async def test_cancel_drops_a_message_before_its_due_time(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    keep = await t.publish("g", _ev("keep"), delay=2 * u)
    drop = await t.publish("g", _ev("drop"), delay=2 * u)
    assert await t.cancel(drop) is True
    assert await t.cancel(drop) is False
    assert [m.id for m in await t.scheduled()] == [keep]
    stats = await t.stats()
    assert (stats.scheduled, stats.messages) == (1, 0)
    assert await t.cancel(keep) is True
    stats = await t.stats()
    assert (stats.scheduled, stats.next_due_at) == (0, None)
    await harness.advance(3 * u)
    assert await t.claim() is None
    assert (await t.stats()).messages == 0


async def test_cancel_is_false_once_due(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    s = await t.publish("g", _ev("S"), delay=u)
    # Exactly at its due time a message is due (due_at > now is what cancel needs).
    await harness.advance(u if harness.fake_time else 1.5 * u)
    assert await t.cancel(s) is False
    lease = await _claim(t)
    assert lease.message_id == s
    assert await t.cancel(s) is False  # leased
    assert await t.ack(lease)
    assert await t.cancel(s) is False  # delivered


async def test_cancel_is_false_for_ordinary_and_unknown_ids(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    ordinary = await t.publish("g", _ev(1))
    s = await t.publish("g", _ev(2), delay=u)
    assert await t.cancel(ordinary) is False
    assert await t.cancel(s + 1000) is False
    assert await t.cancel(2**62) is False
    other = await harness.make()
    assert await other.cancel(s) is False  # another queue's scheduled message
    assert [m.id for m in await t.scheduled()] == [s]
    assert await _drain(t) == [("g", 1)]
    await harness.advance(1.5 * u)
    assert await _drain(t) == [("g", 2)]


# -- the scheduled listing -----------------------------------------------------------------


async def test_scheduled_lists_not_yet_due_messages_in_id_order(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    harness.require("global_id_order")  # a, b, c are published in id order across groups
    u = harness.unit
    t0 = harness.now()
    await t.publish("ordinary", _ev(0))
    a = await t.publish("g1", _ev(1, kind="alpha"), priority=3, delay=4 * u)
    b = await t.publish("g2", _ev(2, kind="beta"), delay=u)
    c = await t.publish("g1", _ev(3, kind="gamma"), priority=1, delay=2 * u)
    listed = await t.scheduled()
    assert [m.id for m in listed] == [a, b, c]
    first = listed[0]
    assert (first.group_id, first.kind, first.priority) == ("g1", "alpha", 3)
    assert _near(harness, first.due_at, t0 + 4 * u)
    assert _near(harness, first.enqueued_at, t0)  # when it was published
    assert [(m.group_id, m.kind, m.priority) for m in listed[1:]] == [
        ("g2", "beta", 0),
        ("g1", "gamma", 1),
    ]
    assert listed[1].due_at < listed[2].due_at < listed[0].due_at
    # Paging: limit and after (an id).
    assert [m.id for m in await t.scheduled(limit=2)] == [a, b]
    assert [m.id for m in await t.scheduled(limit=1, after=a)] == [b]
    assert [m.id for m in await t.scheduled(after=b)] == [c]
    assert await t.scheduled(after=c) == []
    assert [m.id for m in await t.scheduled(limit=1000, after=0)] == [a, b, c]
    # A message that falls due leaves the listing.
    await harness.advance(1.5 * u)
    assert [m.id for m in await t.scheduled()] == [a, c]
    await harness.advance(3 * u)
    assert await t.scheduled() == []


async def test_scheduled_pages_through_many(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    ids = await t.publish_many([(f"g{n % 7}", _ev(n)) for n in range(1005)], delay=5 * u)
    if not harness.capabilities.global_id_order:
        ids = sorted(ids)  # listed in id order, which is not publish order across groups
    page = await t.scheduled(limit=1000)
    assert [m.id for m in page] == ids[:1000]
    rest = await t.scheduled(limit=1000, after=page[-1].id)
    assert [m.id for m in rest] == ids[1000:]
    assert (await t.stats()).scheduled == 1005


# -- purge ---------------------------------------------------------------------------------


async def test_purge_deletes_scheduled_messages_and_ticks(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    harness.require("purge")
    assert isinstance(t, AsyncSupportsPurge)
    u = harness.unit
    other = await harness.make()
    await t.publish("g", _ev(1), delay=u)
    await other.publish("g", _ev(2), delay=u)
    assert await t.publish_tick("nightly", 100.0, "g", _ev(3)) is not None
    assert await other.publish_tick("nightly", 100.0, "g", _ev(4)) is not None
    await t.purge()
    stats = await t.stats()
    assert (stats.messages, stats.scheduled, stats.next_due_at) == (0, 0, None)
    assert await t.scheduled() == []
    assert await t.last_tick("nightly") is None
    await harness.advance(1.5 * u)
    assert await t.claim() is None
    assert await t.publish_tick("nightly", 100.0, "g", _ev(5)) is not None
    assert await _drain(t) == [("g", 5)]
    # The other queue is untouched.
    assert await other.last_tick("nightly") == 100.0
    assert await _drain(other) == [("g", 4), ("g", 2)]


# -- ticks ---------------------------------------------------------------------------------


async def test_publish_tick_appends_each_tick_once(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    assert await t.last_tick("every-minute") is None
    first = await t.publish_tick("every-minute", 1_000.0, "g", _ev(1))
    assert isinstance(first, int)
    assert await t.last_tick("every-minute") == 1_000.0
    assert await t.publish_tick("every-minute", 1_000.0, "g", _ev(2)) is None  # same tick
    assert await t.publish_tick("every-minute", 940.0, "g", _ev(3)) is None  # an earlier one
    assert await t.last_tick("every-minute") == 1_000.0
    second = await t.publish_tick("every-minute", 1_060.0, "g", _ev(4))
    assert isinstance(second, int)
    assert second > first
    assert await t.last_tick("every-minute") == 1_060.0
    assert await t.publish_tick("every-minute", 1_000.0, "g", _ev(5)) is None
    stats = await t.stats()
    assert (stats.messages, stats.scheduled) == (2, 0)  # ordinary messages, claimable now
    lease = await _claim(t)
    assert (lease.message_id, _n(lease)) == (first, 1)
    assert await t.ack(lease)
    assert await _drain(t) == [("g", 4)]


async def test_ticks_are_per_entry_and_per_queue(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    assert await t.publish_tick("a", 500.0, "g", _ev(1)) is not None
    assert await t.publish_tick("b", 5, "g", _ev(2)) is not None  # an int tick is fine
    assert await t.last_tick("b") == 5.0
    assert await t.last_tick("a") == 500.0
    other = await harness.make()
    assert await other.last_tick("a") is None
    assert await other.publish_tick("a", 500.0, "g", _ev(3)) is not None
    assert await t.publish_tick("a", 500.0, "g", _ev(4)) is None
    # Another worker of the same queue shares the record.
    second = await harness.make(queue=t.queue)
    assert await second.publish_tick("a", 500.0, "g", _ev(5)) is None
    assert await second.last_tick("a") == 500.0
    assert await _drain(t) == [("g", 1), ("g", 2)]
    assert await _drain(other) == [("g", 3)]


async def test_a_tick_one_worker_published_is_refused_to_the_others_of_the_queue(
    harness: AsyncHarness,
) -> None:
    """One after another (the threaded race is in the concurrency tests)."""
    t = await _scheduling(harness)
    workers = [t, *[await harness.make(queue=t.queue) for _ in range(3)]]
    results = [await w.publish_tick("hourly", 3_600.0, "g", _ev(n)) for n, w in enumerate(workers)]
    assert [r is not None for r in results] == [True, False, False, False]
    stats = await t.stats()
    assert stats.messages == 1


async def test_publish_tick_honours_priority_and_group_order(harness: AsyncHarness) -> None:
    t = await _scheduling(harness)
    u = harness.unit
    s = await t.publish("g", _ev("S"), delay=u)
    await harness.advance(1.5 * u)
    tick = await t.publish_tick("e", 10.0, "g", _ev("tick"), priority=3)
    assert tick is not None
    assert tick > s
    info = await t.group("g")
    assert info is not None
    assert (info.depth, info.head_message_id) == (2, s)  # the due one joined first
    assert await _drain(t) == [("g", "S"), ("g", "tick")]
    assert await t.publish_tick("e", 20.0, "fresh", _ev("p"), priority=3) is not None
    lease = await _claim(t, min_priority=3)
    assert (lease.group_id, lease.priority) == ("fresh", 3)


# -- wake-ups ------------------------------------------------------------------------------

#: Real seconds until the message of the wake-up test falls due, and how late a waiter may be.
_WAKE_DELAY_S = 1.0
_WAKE_SLACK_S = 0.5


async def test_an_idle_waiter_wakes_by_the_next_due_time(harness: AsyncHarness) -> None:
    """A waiter with a long timeout returns by the time the next scheduled message is due.

    The delay is in real seconds even on a fake clock: the transport caps its wait at
    ``next_due_at - now`` by its own clock, which stands still.
    """
    t = await _scheduling(harness)
    harness.require("wakeups")
    assert isinstance(t, AsyncSupportsWakeups)
    start = time.monotonic()
    s = await t.publish("g", _ev("S"), delay=_WAKE_DELAY_S)
    # The first waits may return at once (a new listener, the publish's own notification).
    quiet = False
    for _ in range(10):
        if not await t.wait_for_messages(0.05):
            quiet = True
            break
    assert quiet, "an idle waiter with nothing due within its timeout must return False"
    remaining = _WAKE_DELAY_S if harness.fake_time else _WAKE_DELAY_S - (time.monotonic() - start)
    began = time.monotonic()
    assert await t.wait_for_messages(30.0) is True
    assert time.monotonic() - began <= max(0.0, remaining) + _WAKE_SLACK_S
    if harness.fake_time:
        harness.clock.advance(_WAKE_DELAY_S)
    else:
        await harness.advance(max(0.0, _WAKE_DELAY_S - (time.monotonic() - start)) + 0.1)
    lease = await _claim(t)
    assert lease.message_id == s


@pytest.mark.parametrize("skew", [1.0, 3.0])
async def test_schedulers_with_skewed_clocks_agree_from_the_first_tick(
    harness: AsyncHarness, skew: float
) -> None:
    """Two schedulers start on a never-published entry (a tick every second), one clock
    *skew* seconds slow, the other *skew* fast. They start the entry from the store's clock,
    so each tick from the first one on is published once, none skipped: with each its own
    clock, the fast one published a tick the slow one's first tick came before, and the tick
    between them was refused to both."""
    t = await _scheduling(harness)
    if not harness.fake_time:
        pytest.skip("the schedulers' skew is set on the shared fake clock")
    other = await harness.make(queue=t.queue)
    schedule = Schedule(
        [ScheduleEntry(name="beat", cron="* * * * * *", group_id="beats", kind="beat")]
    )
    slow = AsyncScheduler(t, schedule, clock=lambda: harness.clock() - skew, name="slow")
    fast = AsyncScheduler(other, schedule, clock=lambda: harness.clock() + skew, name="fast")
    for step in range(24):  # 12 s of the store's time in half-second steps, in turns
        harness.clock.advance(0.5)
        for scheduler in (slow, fast) if step % 2 else (fast, slow):
            await scheduler.run_once()
    ticks: list[float] = []
    while (lease := await t.claim()) is not None:
        ticks.append(datetime.fromisoformat(lease.event.headers[TICK_HEADER]).timestamp())
        assert await t.ack(lease)
    assert len(ticks) >= 10
    assert ticks == [ticks[0] + i for i in range(len(ticks))]  # consecutive: none skipped


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
