"""Browse and search on Redis (lua/lib/browse.lua): the previews the script cuts agree with
pgque.core.browse's, events of another shape are read by the client, and the index of messages
by id (``<prefix>mg``) follows every way a message enters or leaves a group."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgque.conformance.clock import FakeClock
from pgque.core import Event, InMemoryTransport, MessageInfo
from pgque.core.browse import UNDECODABLE_KIND, data_preview
from pgque.redis import RedisTransport

_LONG = "x" * 198

#: Data whose JSON text is cut, escaped or ends close to the preview's length.
_DATA: list[Any] = [
    None,
    True,
    False,
    0,
    -12.5e-7,
    1e300,
    "",
    'a "quoted" \\ back\\slash\n\t\u0001',
    "\u00e9\u4e2d\U0001f600" * 80,
    _LONG,  # 200 characters with its quotes: whole
    _LONG + "y",  # 201: cut
    [_LONG[:196]],  # 200 with brackets and quotes
    [_LONG[:197]],  # 201
    {"a": [1, {"b": '}]\\"'}], "c": None},
    [[[[[]]]]],
    {"\u00e9": "\U0001f600" * 300},
    12345678901234567890,
    "x" * 5000,
]


def _compare(transport: RedisTransport, data: Any, kind: str = "k") -> None:
    event = Event(kind=kind, data=data, headers={"h": '"data":1'})
    group = uuid.uuid4().hex
    mid = transport.publish(group, event)
    found = transport.message(mid)
    assert found is not None
    model = InMemoryTransport()
    model.publish(group, event)
    want = model.messages(group_id=group).items[0]
    fields = ("event_id", "kind", "preview", "truncated", "size", "group_id", "is_head")
    assert {f: getattr(found, f) for f in fields} == {f: getattr(want, f) for f in fields}
    assert transport.messages(group_id=group).items == [found]


@pytest.mark.parametrize("data", _DATA, ids=range(len(_DATA)))
def test_the_scripts_preview_is_the_models(
    transport_factory: Callable[..., RedisTransport], data: Any
) -> None:
    _compare(transport_factory(), data)


def test_kinds_with_escapes_are_read_and_filtered(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    for kind in ['say "hi"', "back\\slash", "\u00e9t\u00e9", "tab\there"]:
        _compare(transport, {"n": 1}, kind=kind)
        page = transport.messages(kind=kind)
        assert [m.kind for m in page.items] == [kind]


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=60),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_json)
def test_the_scripts_preview_agrees_on_any_json(
    transport_factory: Callable[..., RedisTransport], data: Any
) -> None:
    _compare(transport_factory(), data)


def test_an_event_of_another_shape_is_read_by_the_client(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    reordered = transport.publish("g", Event(kind="k"))
    not_json = transport.publish("g", Event(kind="k"))
    foreign = json.dumps({"kind": "other", "data": {"z": 1}, "id": "e1"}, separators=(",", ":"))
    raw_client.hset(transport.key_prefix + "msg", str(reordered), foreign)
    raw_client.hset(transport.key_prefix + "msg", str(not_json), "not json")
    first = transport.message(reordered)
    assert first is not None
    assert (first.kind, first.event_id, first.preview) == ("other", "e1", '{"z":1}')
    assert first.size == len(foreign)
    second = transport.message(not_json)
    assert second is not None
    assert (second.kind, second.preview) == (UNDECODABLE_KIND, "not json")
    assert data_preview("not json")[1] == UNDECODABLE_KIND
    assert [m.message_id for m in transport.messages(kind="other").items] == [reordered]


def _index(transport: RedisTransport, raw_client: redis.Redis) -> dict[int, str]:
    """The index of messages by id, checked against the messages' records."""
    raw: list[bytes] = raw_client.zrange(transport.key_prefix + "mg", 0, -1)  # type: ignore[assignment]
    members = [m.decode() for m in raw]
    index = {int(m.split(":", 1)[0]): m.split(":", 1)[1] for m in members}
    stored = {int(i) for i in raw_client.hkeys(transport.key_prefix + "msg")}
    assert set(index) == stored
    return index


def test_the_index_follows_every_way_in_and_out(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock, max_attempts=2)
    a1, a2 = transport.publish_many([("a", Event(kind="k")), ("a", Event(kind="k"))])
    b1 = transport.publish("b:with:colons", Event(kind="k"))
    later = transport.publish("c", Event(kind="k"), delay=5)
    assert _index(transport, raw_client) == {a1: "a", a2: "a", b1: "b:with:colons"}
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == a1
    assert transport.dead_letter(lease, "bad")
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == b1
    assert transport.ack(lease)
    assert _index(transport, raw_client) == {a2: "a"}
    assert transport.message(a1) is None
    assert transport.message(b1) is None
    assert transport.redrive() == 1  # in place, under its id
    assert _index(transport, raw_client) == {a1: "a", a2: "a"}
    clock.advance(6)
    assert transport.stats().messages == 3  # the scheduled one joined
    assert _index(transport, raw_client) == {a1: "a", a2: "a", later: "c"}
    found = transport.message(later)
    assert found is not None
    assert (found.group_id, found.due_at) == ("c", None)
    transport.purge()
    assert raw_client.exists(transport.key_prefix + "mg") == 0


def test_a_message_stored_before_the_index_is_listed_in_its_group_only(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    old = transport.publish("g", Event(kind="k"))
    new = transport.publish("g", Event(kind="k"))
    index = transport.key_prefix + "mg"
    raw_client.zremrangebyscore(index, old, old)  # as a pgque before the index stored it
    assert transport.message(old) is None
    assert [m.message_id for m in transport.messages(group_id="g").items] == [old, new]
    assert [m.message_id for m in transport.messages().items] == [new]
    # An entry left by such a pgque when it settled a message names nothing: skipped.
    raw_client.zadd(index, {f"{new + 5}:g": new + 5})
    assert transport.message(new + 5) is None
    assert [m.message_id for m in transport.messages().items] == [new]


def test_scheduled_of_a_group_pages_by_id(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    ids = [transport.publish("g", Event(kind="k"), delay=d) for d in (9, 3, 7, 1)]
    transport.publish("h", Event(kind="k"), delay=2)
    assert [s.id for s in transport.scheduled(group_id="g")] == ids
    assert [s.id for s in transport.scheduled(group_id="g", after=ids[1], limit=1)] == [ids[2]]
    clock.advance(4)
    assert [s.id for s in transport.scheduled(group_id="g")] == [ids[0], ids[2]]
    info = transport.message(ids[0])
    assert isinstance(info, MessageInfo)
    assert info.due_at is not None


@pytest.mark.parametrize("element", ["{id}.0", "{id}e0"])
def test_a_buried_hand_written_element_that_reads_as_a_number_keeps_the_index(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis, element: str
) -> None:
    """A group element written by hand that Lua's tonumber reads as a message's id ("7.0",
    "7e0") names no message: burying it as undecodable leaves that message's entry in the
    index, so the message is still found by id."""
    transport = transport_factory()
    mid = transport.publish("real", Event(kind="k"))
    p = transport.key_prefix
    raw_client.zadd(p + "q:bad", {element.format(id=mid): 0})
    raw_client.hset(p + "g:bad", mapping={"prio": "0", "at": "0"})
    raw_client.zadd(p + "r0", {"bad": -1})  # before the real group: claimed first
    raw_client.zadd(p + "kr:", {"bad": -1})  # the default key's ready set
    raw_client.zadd(p + "kq", {"": 0}, nx=True)
    lease = transport.claim()  # buries the bad head, then leases the real message
    assert lease is not None
    assert lease.message_id == mid
    assert [letter.message_id for letter in transport.dead_letters()] == [0]
    found = transport.message(mid)
    assert found is not None
    assert found.group_id == "real"
    assert _index(transport, raw_client) == {mid: "real"}
