"""Refused input: every bad argument raises InvalidInput and changes nothing."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import math
from typing import Any

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _snapshot,
)
from pgque.core import (
    AsyncTransport,
    DeadLetter,
    Event,
    InvalidInput,
    Lease,
    QueueStats,
)

# -- refused input -------------------------------------------------------------------------

# A blank group id (spaces, tabs, newlines, any Unicode white space alone) reads as no group
# at all in every listing, so it is refused like the empty one.
BLANK_GROUP_IDS: list[Any] = [" ", "   ", "\t", " \n ", "\u3000"]
BAD_GROUP_IDS: list[Any] = [
    "",
    *BLANK_GROUP_IDS,
    "x" * 513,
    "é" * 257,
    "a\x00b",
    5,
    None,
    b"bytes",
]
BAD_PRIORITIES: list[Any] = [-1, 5, 1.5, "1", True, None]
BAD_SECONDS: list[Any] = [-1, -0.001, math.nan, math.inf, -math.inf, "1", None, True]
BAD_N: list[Any] = [0, -1, 1.5, "2", None, True]


async def _busy_queue(transport: AsyncTransport) -> Lease:
    """Publish a little and hold one lease, so refused calls have state to leave alone."""
    await transport.publish("keep-a", _ev(1))
    await transport.publish("keep-a", _ev(2))
    await transport.publish("keep-b", _ev(3))
    lease = await _claim(transport)
    assert lease.group_id == "keep-a"
    return lease


async def _assert_untouched(
    transport: AsyncTransport, lease: Lease, before: tuple[QueueStats, list[DeadLetter]]
) -> None:
    assert await _snapshot(transport) == before
    assert await transport.ack(lease)
    assert sorted(await _drain(transport)) == [("keep-a", 2), ("keep-b", 3)]


@pytest.mark.parametrize("group_id", BAD_GROUP_IDS)
async def test_bad_group_id_is_refused(atransport: AsyncTransport, group_id: Any) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.publish(group_id, _ev())
    with pytest.raises(InvalidInput):
        await atransport.publish_many([("fine", _ev()), (group_id, _ev())])
    with pytest.raises(InvalidInput):
        await atransport.unblock(group_id)
    await _assert_untouched(atransport, lease, before)


async def test_group_id_limits_are_inclusive(atransport: AsyncTransport) -> None:
    longest = "é" * 256  # 512 UTF-8 bytes
    await atransport.publish(longest, _ev(1))
    await atransport.publish("x" * 512, _ev(2))
    await atransport.publish("🦆 ü ∑ \t\n", _ev(3))
    drained = await _drain(atransport)
    assert sorted(n for _g, n in drained) == [1, 2, 3]
    assert {g for g, _n in drained} == {longest, "x" * 512, "🦆 ü ∑ \t\n"}


@pytest.mark.parametrize("priority", BAD_PRIORITIES)
async def test_bad_priority_is_refused(atransport: AsyncTransport, priority: Any) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.publish("g", _ev(), priority=priority)
    with pytest.raises(InvalidInput):
        await atransport.publish_many([("g", _ev())], priority=priority)
    with pytest.raises(InvalidInput):
        await atransport.claim(min_priority=priority)
    with pytest.raises(InvalidInput):
        await atransport.claim_many(2, min_priority=priority)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.parametrize("seconds", BAD_SECONDS)
async def test_bad_visibility_or_delay_is_refused(atransport: AsyncTransport, seconds: Any) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.claim(seconds)
    with pytest.raises(InvalidInput):
        await atransport.claim_many(2, seconds)
    with pytest.raises(InvalidInput):
        await atransport.extend(lease, seconds)
    with pytest.raises(InvalidInput):
        await atransport.nack(lease, delay=seconds)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.parametrize("n", BAD_N)
async def test_bad_batch_size_is_refused(atransport: AsyncTransport, n: Any) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.claim_many(n)
    await _assert_untouched(atransport, lease, before)


async def test_lease_from_another_queue_is_refused(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    lease = await _busy_queue(atransport)
    other = await harness.make()
    await other.publish("keep-a", _ev(1))
    foreign = await _claim(other)
    assert foreign.group_id == lease.group_id
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.ack(foreign)
    with pytest.raises(InvalidInput):
        await atransport.ack_many([lease, foreign])
    with pytest.raises(InvalidInput):
        await atransport.nack(foreign)
    with pytest.raises(InvalidInput):
        await atransport.extend(foreign, 60.0)
    with pytest.raises(InvalidInput):
        await atransport.dead_letter(foreign, "no")
    await _assert_untouched(atransport, lease, before)
    assert await other.ack(foreign)


async def test_lease_from_another_transport_is_refused(atransport: AsyncTransport) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    forged = [
        lease.model_copy(update={"origin": lease.origin + "-elsewhere"}),
        lease.model_copy(update={"queue": lease.queue + "x"}),
    ]
    for bad in forged:
        with pytest.raises(InvalidInput):
            await atransport.ack(bad)
        with pytest.raises(InvalidInput):
            await atransport.nack(bad)
        with pytest.raises(InvalidInput):
            await atransport.extend(bad, 60.0)
        with pytest.raises(InvalidInput):
            await atransport.dead_letter(bad, "no")
    not_leases: list[Any] = [None, "lease", lease.model_dump()]
    for not_a_lease in not_leases:
        with pytest.raises(InvalidInput):
            await atransport.ack(not_a_lease)
    await _assert_untouched(atransport, lease, before)


async def test_non_json_event_is_refused(atransport: AsyncTransport) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        Event(kind="k", data={"x": math.nan})
    with pytest.raises(InvalidInput):
        Event(kind="k", data={"when": object()})
    # model_construct skips validation, as a careless caller's subclass might.
    sneaky = [
        Event.model_construct(kind="k", data={"x": math.inf}),
        Event.model_construct(kind="k", data={"x": {1, 2}}),
        Event.model_construct(kind="k", data={1: "int key"}),
    ]
    for event in sneaky:
        with pytest.raises(InvalidInput):
            await atransport.publish("g", event)
        with pytest.raises(InvalidInput):
            await atransport.publish_many([("g", _ev()), ("g", event)])
    not_events: list[Any] = [{"kind": "k"}, "text", None]
    for not_an_event in not_events:
        with pytest.raises(InvalidInput):
            await atransport.publish("g", not_an_event)
    await _assert_untouched(atransport, lease, before)


async def test_bad_batches_are_refused(atransport: AsyncTransport) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    batches: list[Any] = ["ab", 5, [("g",)], [("g", _ev(), 1)], [["g", _ev()]], [(_ev(), "g")]]
    for items in batches:
        with pytest.raises(InvalidInput):
            await atransport.publish_many(items)
    await _assert_untouched(atransport, lease, before)


async def test_bad_dead_letter_arguments_are_refused(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    reasons: list[Any] = [None, 5, "a\x00b", "r" * 2001]
    limits: list[Any] = [0, -1, "5", None]
    id_lists: list[Any] = ["12", 5, ["1"], [1.5]]
    for reason in reasons:
        with pytest.raises(InvalidInput):
            await atransport.dead_letter(lease, reason)
    for limit in limits:
        with pytest.raises(InvalidInput):
            await atransport.dead_letters(limit)
    for ids in id_lists:
        with pytest.raises(InvalidInput):
            await atransport.redrive(ids)
    await _assert_untouched(atransport, lease, before)


BAD_HOLDERS: list[Any] = [5, b"host", "h" * 201, "a\x00b", "g\ud800", ["h"]]
BAD_STATES: list[Any] = ["stuck", "READY", "", 1, True, ["ready"]]
BAD_PAGE_LIMITS: list[Any] = [0, -1, 1001, 1.5, "5", None, True]
BAD_GROUP_AFTERS: list[Any] = [5, b"g", "", "a\x00b", "x" * 513, ["g"]]
BAD_DEAD_AFTERS: list[Any] = ["5", 1.5, True, b"1", [1]]
BAD_ERRORS: list[Any] = [5, b"bytes", object(), ["error"], {"type": "x"}]


async def test_bad_group_api_arguments_are_refused(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    groups_before = await atransport.groups()
    for holder in BAD_HOLDERS:
        with pytest.raises(InvalidInput):
            await atransport.claim(holder=holder)
        with pytest.raises(InvalidInput):
            await atransport.claim_many(2, holder=holder)
    for state in BAD_STATES:
        with pytest.raises(InvalidInput):
            await atransport.groups(state=state)
    for limit in BAD_PAGE_LIMITS:
        with pytest.raises(InvalidInput):
            await atransport.groups(limit=limit)
    for after in BAD_GROUP_AFTERS:
        with pytest.raises(InvalidInput):
            await atransport.groups(after=after)
    for state in BAD_STATES:
        with pytest.raises(InvalidInput):
            await atransport.oldest_groups(state=state)
    for limit in BAD_PAGE_LIMITS:
        with pytest.raises(InvalidInput):
            await atransport.oldest_groups(limit=limit)
    for dead_after in BAD_DEAD_AFTERS:
        with pytest.raises(InvalidInput):
            await atransport.dead_letters(after=dead_after)
    with pytest.raises(InvalidInput):
        await atransport.dead_letters(10_001)
    bad_ids: list[Any] = [None, "12", 5, ["1"], [1.5], [True]]
    for ids in bad_ids:
        with pytest.raises(InvalidInput):
            await atransport.delete_dead_letters(ids)
    for group_id in BAD_GROUP_IDS:
        with pytest.raises(InvalidInput):
            await atransport.group(group_id)
        with pytest.raises(InvalidInput):
            await atransport.pause(group_id)
        with pytest.raises(InvalidInput):
            await atransport.resume(group_id)
    for error in BAD_ERRORS:
        with pytest.raises(InvalidInput):
            await atransport.nack(lease, error=error)
        with pytest.raises(InvalidInput):
            await atransport.dead_letter(lease, "r", error=error)
    not_leases: list[Any] = [None, "lease", lease.model_dump()]
    for bad in [*not_leases, lease.model_copy(update={"queue": lease.queue + "x"})]:
        with pytest.raises(InvalidInput):
            await atransport.release(bad)
    assert await atransport.groups() == groups_before
    await _assert_untouched(atransport, lease, before)


async def test_group_page_limits_are_inclusive(atransport: AsyncTransport) -> None:
    await atransport.publish_many([(f"g{n:04d}", _ev(n)) for n in range(1001)])
    assert len(await atransport.groups(limit=1000)) == 1000
    assert len(await atransport.groups(limit=1)) == 1
    assert [g.group_id for g in await atransport.groups(after="g0999")] == ["g1000"]
    assert len(await atransport.oldest_groups(limit=1000)) == 1000
    assert len(await atransport.oldest_groups(limit=1)) == 1
    assert await atransport.claim(holder="h" * 200) is not None
    assert await atransport.claim(holder="") is not None  # empty: no label
    leased = await atransport.groups(state="leased")
    assert [g.lease_holder for g in leased] == ["h" * 200, None]


BAD_DELAYS: list[Any] = [*BAD_SECONDS, 366 * 86400 + 1, 1e300, -math.inf, [1]]
BAD_MESSAGE_IDS: list[Any] = [0, -1, 1.5, "1", True, False, None, [1], b"1", math.nan]
BAD_ENTRIES: list[Any] = ["", "a\x00b", "x" * 201, "é" * 101, "e\ud800", 5, None, b"e", ["e"]]
BAD_TICKS: list[Any] = [-1, -0.001, math.nan, math.inf, -math.inf, "1", None, True, [1.0]]


async def test_bad_scheduling_arguments_are_refused(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("scheduling")
    lease = await _busy_queue(atransport)
    kept = await atransport.publish("keep-s", _ev(9), delay=1000.0)
    assert await atransport.publish_tick("kept", 10.0, "keep-t", _ev(8)) is not None
    before = await _snapshot(atransport)
    listed = await atransport.scheduled()
    for delay in BAD_DELAYS:
        with pytest.raises(InvalidInput):
            await atransport.publish("g", _ev(), delay=delay)
        with pytest.raises(InvalidInput):
            await atransport.publish_many([("g", _ev()), ("h", _ev())], delay=delay)
    for group_id in BAD_GROUP_IDS:
        with pytest.raises(InvalidInput):
            await atransport.publish(group_id, _ev(), delay=1.0)
        with pytest.raises(InvalidInput):
            await atransport.publish_tick("e", 20.0, group_id, _ev())
    for priority in BAD_PRIORITIES:
        with pytest.raises(InvalidInput):
            await atransport.publish("g", _ev(), priority=priority, delay=1.0)
        with pytest.raises(InvalidInput):
            await atransport.publish_tick("e", 20.0, "g", _ev(), priority=priority)
    not_events: list[Any] = [
        None,
        "text",
        {"kind": "k"},
        Event.model_construct(kind="k", data=math.nan),
    ]
    for event in not_events:
        with pytest.raises(InvalidInput):
            await atransport.publish("g", event, delay=1.0)
        with pytest.raises(InvalidInput):
            await atransport.publish_tick("e", 20.0, "g", event)
    for message_id in BAD_MESSAGE_IDS:
        with pytest.raises(InvalidInput):
            await atransport.cancel(message_id)
    for limit in BAD_PAGE_LIMITS:
        with pytest.raises(InvalidInput):
            await atransport.scheduled(limit=limit)
    for after in BAD_DEAD_AFTERS:
        with pytest.raises(InvalidInput):
            await atransport.scheduled(after=after)
    for entry in BAD_ENTRIES:
        with pytest.raises(InvalidInput):
            await atransport.publish_tick(entry, 20.0, "g", _ev())
        with pytest.raises(InvalidInput):
            await atransport.last_tick(entry)
    for tick in BAD_TICKS:
        with pytest.raises(InvalidInput):
            await atransport.publish_tick("e", tick, "g", _ev())
    assert await atransport.scheduled() == listed
    assert [m.id for m in listed] == [kept]
    assert await atransport.last_tick("e") is None
    assert await atransport.last_tick("kept") == 10.0
    assert await _snapshot(atransport) == before
    assert await atransport.cancel(kept) is True
    assert await atransport.ack(lease)
    assert sorted(await _drain(atransport)) == [("keep-a", 2), ("keep-b", 3), ("keep-t", 8)]


async def test_scheduling_limits_are_inclusive(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("scheduling")
    year = await atransport.publish("g", _ev(1), delay=366 * 86400)
    # A tiny delay schedules too (on a real clock it must not fall due during the test).
    tiny = await atransport.publish("g", _ev(2), delay=1e-3 if harness.fake_time else 60.0)
    assert [m.id for m in await atransport.scheduled(limit=1000)] == [year, tiny]
    assert [m.id for m in await atransport.scheduled(limit=1)] == [year]
    assert [m.id for m in await atransport.scheduled(after=-5)] == [year, tiny]
    assert await atransport.publish_tick("e" * 200, 0, "g", _ev(3)) is not None
    assert await atransport.publish_tick("é" * 100, 0.0, "g", _ev(4)) is not None
    assert await atransport.last_tick("e" * 200) == 0.0
    assert await atransport.publish_tick("big", 1e12, "g", _ev(5)) is not None
    assert await atransport.last_tick("big") == 1e12
    assert await atransport.cancel(year) is True


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
