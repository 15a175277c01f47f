"""Browse and search: ``groups(prefix=)``, ``messages()``, ``message(id)`` and
``scheduled(group_id=)``.

``groups(prefix=)`` is part of the contract (every transport); the rest is gated on
``Capabilities.browse`` (pgque.core.browse). A group's messages list in its order, head first,
keyset-paged by the page's ``next_after``; a kind filter examines at most ``SCAN_ROWS``
messages per call and says where it stopped; each item carries a preview of its data cut to
``PREVIEW_CHARS`` characters and the stored event's size, never the whole payload.
"""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import _claim, _ev
from pgque.core import (
    AsyncSupportsBrowse,
    AsyncTransport,
    Event,
    InvalidInput,
    MessageInfo,
    MessagePage,
)
from pgque.core.browse import PREVIEW_CHARS, SCAN_ROWS

# -- helpers -------------------------------------------------------------------------------


async def _browsing(harness: AsyncHarness) -> AsyncTransport:
    """Open the test's transport; skip unless it declares ``browse``."""
    transport = await harness.open()
    harness.require("browse")
    assert isinstance(transport, AsyncSupportsBrowse)
    return transport


async def _page(t: AsyncTransport, **query: object) -> MessagePage:
    assert isinstance(t, AsyncSupportsBrowse)
    return await t.messages(**query)  # type: ignore[arg-type]


async def _one(t: AsyncTransport, message_id: int) -> MessageInfo | None:
    assert isinstance(t, AsyncSupportsBrowse)
    return await t.message(message_id)


async def _all(
    t: AsyncTransport, after: int | None = None, **query: object
) -> tuple[list[MessageInfo], int]:
    """Every item of a listing from *after* on, page after page; and how many calls it took."""
    items: list[MessageInfo] = []
    calls = 0
    while True:
        page = await _page(t, after=after, **query)
        calls += 1
        items += page.items
        if page.next_after is None:
            return items, calls
        assert calls < 1000, "the listing never ends"
        after = page.next_after


# -- groups(prefix=) ---------------------------------------------------------------------------

_GROUP_IDS = [
    "a",
    "ab",
    "ab\u00e9",
    "abc",
    "ab\U0010ffff",
    "ab\U0010ffffz",
    "ac",
    "b",
    "\u00e9t\u00e9",
]


async def test_groups_with_a_prefix_are_the_ids_that_start_with_it(harness: AsyncHarness) -> None:
    t = await harness.open()
    for group_id in _GROUP_IDS:
        await t.publish(group_id, _ev(group_id))
    by_bytes = sorted(_GROUP_IDS, key=lambda g: g.encode("utf-8"))
    for prefix in ["ab", "a", "ab\U0010ffff", "\u00e9", "abc", "x", "ab\u00e9"]:
        want = [g for g in by_bytes if g.startswith(prefix)]
        assert [g.group_id for g in await t.groups(prefix=prefix)] == want, prefix
    assert [g.group_id for g in await t.groups(prefix="")] == by_bytes


async def test_groups_with_a_prefix_page_by_id(harness: AsyncHarness) -> None:
    t = await harness.open()
    for group_id in _GROUP_IDS:
        await t.publish(group_id, _ev(group_id))
    want = sorted((g for g in _GROUP_IDS if g.startswith("ab")), key=lambda g: g.encode())
    seen: list[str] = []
    after: str | None = None
    while True:
        page = await t.groups(prefix="ab", limit=2, after=after)
        if not page:
            break
        seen += [g.group_id for g in page]
        after = page[-1].group_id
    assert seen == want
    # A cursor before the range starts at its first id; one past it finds nothing.
    assert [g.group_id for g in await t.groups(prefix="ab", after="aa", limit=1)] == ["ab"]
    assert await t.groups(prefix="ab", after="ac") == []


async def test_groups_with_a_prefix_and_a_state(harness: AsyncHarness) -> None:
    t = await harness.open()
    for group_id in ["job-1", "job-2", "job-3", "other-1"]:
        await t.publish(group_id, _ev(group_id))
    assert await t.pause("job-2")
    assert await t.pause("other-1")
    assert [g.group_id for g in await t.groups(prefix="job-", state="paused")] == ["job-2"]
    assert [g.group_id for g in await t.groups(prefix="job-", state="ready")] == [
        "job-1",
        "job-3",
    ]


async def test_groups_refuse_a_bad_prefix(harness: AsyncHarness) -> None:
    t = await harness.open()
    for bad in [1, "a\x00", "x" * 600, "\ud800"]:
        with pytest.raises(InvalidInput):
            await t.groups(prefix=bad)  # type: ignore[arg-type]


# -- messages(group_id=) -----------------------------------------------------------------------


async def test_a_groups_messages_list_in_order_head_first(harness: AsyncHarness) -> None:
    t = await _browsing(harness)
    ids = [await t.publish("g", _ev(n, kind=f"k{n % 2}")) for n in range(5)]
    await t.publish("other", _ev(9))
    page = await _page(t, group_id="g")
    assert [m.message_id for m in page.items] == ids
    assert page.next_after is None
    assert [m.is_head for m in page.items] == [True, False, False, False, False]
    first = page.items[0]
    assert first.group_id == "g"
    assert first.kind == "k0"
    assert first.due_at is None
    assert first.preview == '{"n":0}'
    assert first.truncated is False
    assert first.attempts == 0
    assert abs(first.enqueued_at - harness.now()) < harness.unit + 5


async def test_a_groups_messages_page_with_next_after(harness: AsyncHarness) -> None:
    t = await _browsing(harness)
    ids = [await t.publish("g", _ev(n)) for n in range(7)]
    first = await _page(t, group_id="g", limit=3)
    assert [m.message_id for m in first.items] == ids[:3]
    assert first.next_after is not None
    second = await _page(t, group_id="g", limit=3, after=first.next_after)
    assert [m.message_id for m in second.items] == ids[3:6]
    assert [m.is_head for m in second.items] == [False, False, False]
    items, _calls = await _all(t, group_id="g", limit=3)
    assert [m.message_id for m in items] == ids
    assert (await _page(t, group_id="nobody")).items == []


async def test_the_head_in_flight_is_listed_with_its_attempts(harness: AsyncHarness) -> None:
    t = await _browsing(harness)
    head = await t.publish("g", _ev(1))
    behind = await t.publish("g", _ev(2))
    lease = await _claim(t)
    assert lease.message_id == head
    page = await _page(t, group_id="g")
    assert [(m.message_id, m.is_head, m.attempts) for m in page.items] == [
        (head, True, 1),
        (behind, False, 0),
    ]
    assert await t.ack(lease)
    page = await _page(t, group_id="g")
    assert [(m.message_id, m.is_head) for m in page.items] == [(behind, True)]


async def test_a_preview_is_cut_and_the_size_is_the_stored_events(harness: AsyncHarness) -> None:
    t = await _browsing(harness)
    big = Event(kind="big", data={"text": "\u00e9" * 5000})
    small = Event(kind="small", data=[1, "two", None, {"x": 1.5}])
    await t.publish("g", big)
    await t.publish("g", small)
    long_item, short_item = (await _page(t, group_id="g")).items
    whole = '{"text":"' + "\u00e9" * 5000 + '"}'
    assert long_item.truncated is True
    assert long_item.preview == whole[:PREVIEW_CHARS]
    assert len(long_item.preview) == PREVIEW_CHARS
    assert long_item.size == len(big.to_json().encode("utf-8"))
    assert long_item.event_id == big.id
    assert short_item.truncated is False
    assert short_item.preview == '[1,"two",null,{"x":1.5}]'
    assert short_item.size == len(small.to_json().encode("utf-8"))


# -- messages(kind=) ---------------------------------------------------------------------------


async def test_a_kind_filter_lists_that_kind_queue_wide_and_in_a_group(
    harness: AsyncHarness,
) -> None:
    t = await _browsing(harness)
    a1 = await t.publish("a", _ev(1, kind="invoice"))
    await t.publish("a", _ev(2, kind="mail"))
    b1 = await t.publish("b", _ev(3, kind="invoice"))
    a3 = await t.publish("a", _ev(4, kind="invoice"))
    items, _calls = await _all(t, kind="invoice")
    assert [(m.message_id, m.group_id) for m in items] == [(a1, "a"), (b1, "b"), (a3, "a")]
    assert [m.is_head for m in items] == [True, True, False]
    items, _calls = await _all(t, kind="invoice", group_id="a")
    assert [m.message_id for m in items] == [a1, a3]
    items, _calls = await _all(t, kind="invoice", limit=1)
    assert [m.message_id for m in items] == [a1, b1, a3]
    assert (await _page(t, kind="nothing")).items == []
    everything, _calls = await _all(t)
    assert len(everything) == 4


async def test_a_kind_filter_examines_a_bounded_number_of_messages(
    harness: AsyncHarness,
) -> None:
    t = await _browsing(harness)
    for start in range(0, SCAN_ROWS + 500, 2500):
        await t.publish_many(
            [(f"g{n % 7}", _ev(n, kind="noise")) for n in range(start, start + 2500)]
        )
    rare = await t.publish("g3", _ev(-1, kind="rare"))
    first = await _page(t, kind="rare")
    # The call stopped after SCAN_ROWS messages without reaching the rare one.
    assert first.items == []
    assert first.next_after is not None
    # Going on from there finds it (a store that walks the messages of other queues too, as
    # PostgreSQL's queue-wide walk does, may take more than one more call).
    rest, calls = await _all(t, kind="rare", after=first.next_after)
    assert [m.message_id for m in rest] == [rare]
    assert calls >= 1


# -- message(id) and scheduled(group_id=) ------------------------------------------------------


async def test_message_finds_one_by_id_until_it_is_settled(harness: AsyncHarness) -> None:
    t = await _browsing(harness)
    head = await t.publish("g", _ev(1, kind="first"))
    behind = await t.publish("g", _ev(2, kind="second"))
    found = await _one(t, behind)
    assert found is not None
    assert (found.message_id, found.group_id, found.kind, found.is_head) == (
        behind,
        "g",
        "second",
        False,
    )
    lease = await _claim(t)
    in_flight = await _one(t, head)
    assert in_flight is not None
    assert (in_flight.is_head, in_flight.attempts) == (True, 1)
    assert await t.ack(lease)
    assert await _one(t, head) is None
    assert await _one(t, behind + 1000) is None
    with pytest.raises(InvalidInput):
        await _one(t, 0)


async def test_a_scheduled_message_is_found_and_listed_by_group(harness: AsyncHarness) -> None:
    t = await _browsing(harness)
    harness.require("scheduling")
    u = harness.unit
    later = await t.publish("g", _ev(1, kind="later"), delay=50 * u)
    await t.publish("other", _ev(2), delay=50 * u)
    also = await t.publish("g", _ev(3), delay=60 * u)
    now_id = await t.publish("g", _ev(4))
    found = await _one(t, later)
    assert found is not None
    assert found.due_at is not None
    assert found.is_head is False
    assert (found.group_id, found.kind) == ("g", "later")
    assert isinstance(t, AsyncSupportsBrowse)
    assert [s.id for s in await t.scheduled(group_id="g")] == [later, also]
    assert [s.id for s in await t.scheduled(group_id="g", after=later)] == [also]
    assert [s.id for s in await t.scheduled(group_id="g", limit=1)] == [later]
    assert await t.scheduled(group_id="nobody") == []
    # Listed behind the head they are not: they join the tail when due.
    assert [m.message_id for m in (await _page(t, group_id="g")).items] == [now_id]
    await harness.advance(55 * u)
    assert [s.id for s in await t.scheduled(group_id="g")] == [also]
    assert [m.message_id for m in (await _page(t, group_id="g")).items] == [now_id, later]


async def test_browse_refuses_bad_arguments(harness: AsyncHarness) -> None:
    t = await _browsing(harness)
    bad_queries: list[dict[str, object]] = [
        {"limit": 0},
        {"limit": 1001},
        {"limit": True},
        {"after": "x"},
        {"group_id": ""},
        {"group_id": "a\x00"},
        {"kind": ""},
        {"kind": 5},
    ]
    for query in bad_queries:
        with pytest.raises(InvalidInput):
            await _page(t, **query)
    assert isinstance(t, AsyncSupportsBrowse)
    with pytest.raises(InvalidInput):
        await t.scheduled(group_id="")
