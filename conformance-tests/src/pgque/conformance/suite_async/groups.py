"""Groups as objects: ``group()`` / ``groups()`` fields, states, precedence, paging, stats."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import bisect

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
)
from pgque.core import AsyncTransport, GroupInfo, GroupStateName

# -- one group -----------------------------------------------------------------------------


def _close(harness: AsyncHarness, got: float | None, want: float) -> None:
    """*got* is *want* (to the millisecond on the fake clock, within seconds on a real one)."""
    assert got is not None
    if harness.fake_time:
        assert got == pytest.approx(want, abs=1e-3)
    else:
        assert got == pytest.approx(want, abs=5.0)


async def _info(transport: AsyncTransport, group_id: str) -> GroupInfo:
    info = await transport.group(group_id)
    assert info is not None, f"group {group_id!r} should exist"
    return info


async def test_group_of_a_new_queue_is_none(atransport: AsyncTransport) -> None:
    assert await atransport.group("nobody") is None
    assert await atransport.groups() == []


async def test_group_fields_when_ready(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    before = harness.now()
    first = await atransport.publish("g", _ev(1), priority=2)
    await atransport.publish("g", _ev(2))
    info = await _info(atransport, "g")
    assert (info.group_id, info.state, info.depth, info.priority) == ("g", "ready", 2, 2)
    assert (info.head_message_id, info.head_attempts) == (first, 0)
    _close(harness, info.head_enqueued_at, before)
    assert (info.lease_expires_at, info.lease_holder, info.resume_at) == (None, None, None)
    assert info.last_error is None
    assert await atransport.groups() == [info]


async def test_group_fields_when_leased_and_expired(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    first = await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport, 2 * u, holder="host-a:41:0")
    info = await _info(atransport, "g")
    assert (info.state, info.depth, info.head_message_id, info.head_attempts) == (
        "leased",
        2,
        first,
        1,
    )
    assert info.lease_holder == "host-a:41:0"
    _close(harness, info.lease_expires_at, lease.expires_at)
    assert info.resume_at is None
    # Expired and not yet claimed again: ready, but still showing who held it until when.
    await harness.advance(3 * u)
    expired = await _info(atransport, "g")
    assert expired.state == "ready"
    assert expired.lease_holder == "host-a:41:0"
    _close(harness, expired.lease_expires_at, lease.expires_at)
    # Claimed again without a holder: the label goes, the attempt counts.
    again = await _claim(atransport, 60.0)
    assert again.message_id == first
    taken = await _info(atransport, "g")
    assert (taken.state, taken.lease_holder, taken.head_attempts) == ("leased", None, 2)
    assert await atransport.ack(again)
    after = await _info(atransport, "g")
    assert (after.state, after.depth, after.head_attempts) == ("ready", 1, 0)
    assert (after.lease_expires_at, after.lease_holder) == (None, None)


async def test_group_fields_when_parked(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    u = harness.unit
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport, holder="w")
    before = harness.now()
    assert await atransport.nack(lease, delay=3 * u, error="bad sku")
    info = await _info(atransport, "g")
    assert (info.state, info.head_attempts) == ("parked", 1)
    _close(harness, info.resume_at, before + 3 * u)
    assert (info.lease_expires_at, info.lease_holder) == (None, None)
    assert info.last_error is not None
    assert (info.last_error.type, info.last_error.message) == ("error", "bad sku")
    await harness.advance(4 * u)
    later = await _info(atransport, "g")
    assert (later.state, later.resume_at) == ("ready", None)


async def test_group_fields_when_blocked(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    assert await q.nack(await _claim(q), error=ValueError("out of stock"))
    assert await q.claim() is None  # the exhausted head blocks the group
    info = await _info(q, "g")
    assert (info.state, info.depth, info.head_attempts) == ("blocked", 2, 1)
    assert info.last_error is not None
    assert (info.last_error.type, info.last_error.message) == ("ValueError", "out of stock")
    assert (info.lease_expires_at, info.lease_holder, info.resume_at) == (None, None, None)
    assert [g.group_id for g in await q.groups(state="blocked")] == ["g"]
    assert await q.unblock("g")
    assert (await _info(q, "g")).state == "ready"


async def test_paused_wins_over_every_other_state(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    u = harness.unit
    q = await harness.make(max_attempts=1, on_exhausted="block")
    for group_id in ("leased", "parked", "blocked"):
        await q.publish(group_id, _ev(group_id))
    got = {lease.group_id: lease for lease in await q.claim_many(3, 10 * u, holder="h")}
    assert set(got) == {"leased", "parked", "blocked"}
    assert await q.nack(got["parked"], delay=5 * u)
    assert await q.nack(got["blocked"])
    assert await q.claim() is None  # blocks "blocked"
    assert [(g.group_id, g.state) for g in await q.groups()] == [
        ("blocked", "blocked"),
        ("leased", "leased"),
        ("parked", "parked"),
    ]
    for group_id in ("leased", "parked", "blocked"):
        assert await q.pause(group_id) is True
    infos = {g.group_id: g for g in await q.groups()}
    assert {g: i.state for g, i in infos.items()} == {
        "blocked": "paused",
        "leased": "paused",
        "parked": "paused",
    }
    # The hold hides nothing else: the lease and the park still show.
    assert infos["leased"].lease_holder == "h"
    _close(harness, infos["leased"].lease_expires_at, got["leased"].expires_at)
    assert infos["parked"].resume_at is not None
    stats = await q.stats()
    assert (stats.paused, stats.in_flight, stats.parked, stats.blocked) == (3, 0, 0, 0)
    assert [g.group_id for g in await q.groups(state="paused")] == ["blocked", "leased", "parked"]
    others: tuple[GroupStateName, ...] = ("leased", "parked", "blocked", "ready")
    for state in others:
        assert await q.groups(state=state) == []
    for group_id in ("leased", "parked", "blocked"):
        assert await q.resume(group_id) is True
    assert [(g.group_id, g.state) for g in await q.groups()] == [
        ("blocked", "blocked"),
        ("leased", "leased"),
        ("parked", "parked"),
    ]


async def test_blocked_wins_over_a_lease_that_expired(harness: AsyncHarness) -> None:
    """An expired lease, then a claim that finds the head exhausted: blocked, no lease shown."""
    await harness.open()
    harness.require("dead_letters")
    u = harness.unit
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await _claim(q, u, holder="gone")
    await harness.advance(2 * u)
    assert await q.claim(u) is None
    info = await _info(q, "g")
    assert (info.state, info.lease_holder, info.lease_expires_at) == ("blocked", None, None)


# -- many groups ---------------------------------------------------------------------------


async def test_groups_are_listed_in_byte_order(atransport: AsyncTransport) -> None:
    ids = ["b", "a", "B", "é", "🦆", "a b", "aa", "a\U0010ffff", "z", "ÿ", "A"]
    for n, group_id in enumerate(ids):
        await atransport.publish(group_id, _ev(n))
    want = sorted(ids, key=lambda g: g.encode("utf-8"))
    assert [g.group_id for g in await atransport.groups()] == want
    assert [g.group_id for g in await atransport.groups(limit=3)] == want[:3]
    pages: list[str] = []
    after: str | None = None
    while page := await atransport.groups(limit=2, after=after):
        assert len(page) <= 2
        pages += [g.group_id for g in page]
        after = page[-1].group_id
    assert pages == want
    # after need not be a group that exists.
    later = [g for g in want if g.encode("utf-8") > b"ab"]
    assert [g.group_id for g in await atransport.groups(after="ab")] == later
    assert later[0] == "a\U0010ffff"
    assert await atransport.groups(after="\U0010ffff") == []


async def test_groups_state_filter_pages_too(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    for n in range(12):
        await atransport.publish(f"g{n:02d}", _ev(n))
    leases = await atransport.claim_many(12, 10 * u)
    assert len(leases) == 12
    for lease in leases:
        n = int(lease.group_id[1:])
        if n % 3 == 1:
            assert await atransport.nack(lease, delay=5 * u)
        elif n % 3 == 2:
            assert await atransport.nack(lease)
    by_state: dict[GroupStateName, list[str]] = {
        "leased": [f"g{n:02d}" for n in range(12) if n % 3 == 0],
        "parked": [f"g{n:02d}" for n in range(12) if n % 3 == 1],
        "ready": [f"g{n:02d}" for n in range(12) if n % 3 == 2],
    }
    for state, want in by_state.items():
        assert [g.group_id for g in await atransport.groups(state=state)] == want
        paged: list[str] = []
        after: str | None = None
        while page := await atransport.groups(state=state, limit=1, after=after):
            assert [g.state for g in page] == [state]
            paged.append(page[0].group_id)
            after = page[0].group_id
        assert paged == want
    assert await atransport.groups(state="paused") == []
    assert await atransport.groups(state="blocked") == []
    assert await atransport.groups(state="parked", after="g07") == [
        g for g in await atransport.groups(state="parked") if g.group_id > "g07"
    ]


#: Groups of the paging test; every tenth is a victim drained while the pages are read.
PAGING_GROUPS = 10_000
PAGE = 500


async def test_paging_10000_groups_while_groups_come_and_go(atransport: AsyncTransport) -> None:
    """Every page is exactly the groups that exist when it is read: no gap, no repeat."""
    names = [f"g{n:05d}" for n in range(PAGING_GROUPS)]
    victims = {name for n, name in enumerate(names) if n % 10 == 3}
    for start in range(0, PAGING_GROUPS, 2_000):
        batch = names[start : start + 2_000]
        await atransport.publish_many([(g, _ev(0)) for g in batch if g not in victims])
        await atransport.publish_many([(g, _ev(0)) for g in batch if g in victims], priority=4)
    existing = sorted(names)  # ASCII ids: str order is byte order
    seen: list[str] = []
    after: str | None = None
    page_number = 0
    while True:
        page = await atransport.groups(limit=PAGE, after=after)
        start = 0 if after is None else bisect.bisect_right(existing, after)
        assert [g.group_id for g in page] == existing[start : start + PAGE], page_number
        if not page:
            break
        assert all(g.depth >= 1 and g.state == "ready" for g in page)
        seen += [g.group_id for g in page]
        after = page[-1].group_id
        page_number += 1
        # Between pages: new groups appear before and after the cursor, victims drain.
        fresh = [
            f"g{(page_number * 7919 + k * 1237) % PAGING_GROUPS:05d}~{page_number}"
            for k in range(40)
        ]
        await atransport.publish_many([(g, _ev(1)) for g in fresh])
        for group_id in fresh:
            bisect.insort(existing, group_id)
        leases = await atransport.claim_many(150, 60.0, min_priority=4)
        assert await atransport.ack_many(leases) == [True] * len(leases)
        for lease in leases:
            assert lease.group_id in victims
            existing.pop(bisect.bisect_left(existing, lease.group_id))
    assert len(seen) == len(set(seen))
    assert seen == sorted(seen)
    stable = [g for g in names if g not in victims]
    assert set(stable) <= set(seen)
    assert page_number >= PAGING_GROUPS // (2 * PAGE)
    assert (await atransport.stats()).groups == len(existing)


# -- oldest heads first ---------------------------------------------------------------------


async def _ids(
    transport: AsyncTransport, *, limit: int = 10, state: GroupStateName | None = None
) -> list[str]:
    return [g.group_id for g in await transport.oldest_groups(limit=limit, state=state)]


async def test_oldest_groups_orders_by_head_age_not_by_id_or_publish(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    """The head's enqueue time decides: a group whose old head went is behind the others."""
    u = harness.unit
    assert await atransport.oldest_groups() == []
    await atransport.publish("c", _ev(0))
    await harness.advance(u)
    await atransport.publish("a", _ev(1))
    await atransport.publish("a", _ev(2))
    await harness.advance(u)
    await atransport.publish("b", _ev(3))
    await harness.advance(u)
    await atransport.publish("c", _ev(4))
    assert await _ids(atransport) == ["c", "a", "b"]
    infos = await atransport.oldest_groups()
    assert infos == [await _info(atransport, g) for g in ("c", "a", "b")]
    ages = [i.head_enqueued_at or 0.0 for i in infos]
    assert ages == sorted(ages)
    # Acking c's old head leaves it the newest head of the three.
    for lease in await atransport.claim_many(3, 60.0):
        if lease.group_id == "c":
            assert await atransport.ack(lease)
        else:
            assert await atransport.release(lease)
    assert await _ids(atransport) == ["a", "b", "c"]
    assert await _ids(atransport, limit=2) == ["a", "b"]
    assert await _ids(atransport, limit=1) == ["a"]


async def test_oldest_groups_breaks_ties_by_id_and_skips_empty_groups(
    atransport: AsyncTransport,
) -> None:
    # One publish_many: every message has the same enqueue time.
    await atransport.publish_many([("y", _ev(0)), ("x", _ev(1)), ("é", _ev(2)), ("B", _ev(3))])
    assert await atransport.pause("nothing-in-it")
    want = sorted(["y", "x", "é", "B"], key=lambda g: g.encode("utf-8"))
    assert await _ids(atransport) == want
    assert await _ids(atransport, limit=1000) == want


async def test_oldest_groups_sees_past_a_long_old_backlog(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    """A stuck group with many old messages does not hide the next oldest heads."""
    u = harness.unit
    await atransport.publish_many([("stuck", _ev(n)) for n in range(300)])
    for n in range(5):
        await harness.advance(u / 4)
        await atransport.publish(f"later{4 - n}", _ev(n))
        await atransport.publish("stuck", _ev(1000 + n))
    assert await _ids(atransport, limit=3) == ["stuck", "later4", "later3"]
    assert await _ids(atransport) == ["stuck", "later4", "later3", "later2", "later1", "later0"]


async def test_oldest_groups_follows_a_head_redriven_in_place(harness: AsyncHarness) -> None:
    """A redriven head is enqueued at its redrive: its group's later messages are older."""
    await harness.open()
    harness.require("dead_letters")
    u = harness.unit
    q = await harness.make()
    await q.publish("x", _ev(1))
    await harness.advance(u)
    await q.publish("x", _ev(2))
    lease = await _claim(q)
    assert await q.dead_letter(lease, "bad")
    await harness.advance(u)
    await q.publish("y", _ev(3))
    await harness.advance(u)
    assert await q.redrive([d.id for d in await q.dead_letters()]) == 1
    x = await _info(q, "x")
    assert x.head_message_id == lease.message_id  # back in place, ahead of the older message
    assert await _ids(q) == ["y", "x"]
    assert await q.oldest_groups() == [await _info(q, "y"), x]
    assert await _ids(q, limit=1) == ["y"]


async def test_oldest_groups_filters_by_state(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    u = harness.unit
    q = await harness.make(max_attempts=1, on_exhausted="block")
    names: list[GroupStateName] = ["blocked", "leased", "parked", "paused", "ready"]
    for name in reversed(names):  # the oldest head is "ready"'s, then "paused"'s, ...
        await q.publish(name, _ev(name))
        await harness.advance(u / 4)
    assert await q.pause("paused")
    got = {lease.group_id: lease for lease in await q.claim_many(4, 10 * u, holder="h")}
    assert set(got) == {"blocked", "leased", "parked", "ready"}
    assert await q.nack(got["parked"], delay=5 * u)
    assert await q.nack(got["blocked"])
    assert await q.claim(u) is None  # finds "blocked" exhausted and blocks it
    assert await q.release(got["ready"])
    assert await _ids(q) == ["ready", "paused", "parked", "leased", "blocked"]
    for state in names:
        assert await _ids(q, state=state) == [state]
    assert await _ids(q, state="ready", limit=1) == ["ready"]
    assert [(g.group_id, g.state) for g in await q.oldest_groups(state="blocked")] == [
        ("blocked", "blocked")
    ]


async def test_stats_count_paused_groups_once(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish_many([("flight", _ev(1)), ("park", _ev(2)), ("idle", _ev(3))])
    got = {lease.group_id: lease for lease in await atransport.claim_many(3, 10 * u)}
    assert await atransport.nack(got["park"], delay=5 * u)
    assert await atransport.ack(got["idle"])
    assert await atransport.pause("flight")
    assert await atransport.pause("park")
    assert await atransport.pause("empty")
    stats = await atransport.stats()
    assert (stats.groups, stats.messages, stats.paused) == (3, 2, 3)
    assert (stats.in_flight, stats.parked, stats.blocked) == (0, 0, 0)
    assert stats.next_resume_at is None  # a paused group comes due by no clock
    assert await atransport.resume("flight")
    stats = await atransport.stats()
    assert (stats.paused, stats.in_flight) == (2, 1)
    assert await atransport.resume("empty")  # an empty group goes with its hold
    assert await atransport.resume("park")
    stats = await atransport.stats()
    assert (stats.groups, stats.paused, stats.in_flight, stats.parked) == (2, 0, 1, 1)
    assert await atransport.ack(got["flight"])
    await harness.advance(6 * u)
    assert [n for _g, n in await _drain(atransport)] == [2]


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
