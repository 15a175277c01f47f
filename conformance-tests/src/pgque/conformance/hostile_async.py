"""The hostile-input catalogue (asyncio API): bad input through every method, and what survives.

Every entry of the catalogue is a call that must fail with :class:`~pgque.core.InvalidInput`:
group ids that are empty, too long, binary, not text or carry NUL or a lone surrogate; events
whose data is not JSON or whose JSON is beyond the transport's ``max_event_bytes``; priorities,
seconds, counts and ids that are NaN, infinite, negative, huge, of the wrong type; reasons,
holders, group states, errors and settlements that are not what they must be; leases that are
not leases or come from another queue or another store. Forged leases of the right shape (a
made-up token, another message id, another group) are not errors: fencing answers them with
``False`` / ``None`` and changes nothing. After the whole catalogue a consistency check (stats,
the held lease, a full drain in publish order) finds the queue intact.
Text that is hostile but valid (SQL, PL/pgSQL, Lua and Redis metacharacters in group ids,
kinds, headers, data and reasons) round-trips as plain data.

Enable it with ``from pgque.conformance.hostile_async import *`` and the conformance fixture
``async_transport_factory``. A backend that talks to a server may also provide
``offline_async_transport``: a transport whose server does not exist; every catalogue call on
it must still raise InvalidInput, which shows the checks run before any I/O.
"""

# The source of its blocking twin, hostile_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import math
from typing import Any

import pytest

from pgque.conformance._types import AsyncTransportFactory
from pgque.core import (
    AsyncTransport,
    ConfigurationError,
    ConnectionLost,
    Event,
    InvalidInput,
    Lease,
    PgqueError,
    Settlement,
)
from pgque.core.validation import DEFAULT_MAX_EVENT_BYTES

__all__ = [
    "HOSTILE_GROUP_IDS",
    "HOSTILE_MARKUP",
    "BAD_GROUP_IDS",
    "Call",
    "bad_calls",
    "sized_event",
    "test_catalogue_of_bad_input_leaves_the_queue_intact",
    "test_catalogue_is_refused_before_any_io",
    "test_forged_leases_are_fenced_out",
    "test_hostile_text_round_trips_as_plain_data",
    "test_events_beyond_max_event_bytes_are_refused",
    "test_invalid_max_event_bytes_is_refused",
    "bad_schedule_calls",
    "test_scheduling_catalogue_leaves_the_queue_intact",
    "test_scheduling_catalogue_is_refused_before_any_io",
    "test_hostile_entries_and_groups_round_trip_through_scheduling",
]

MIB = 1024 * 1024

#: Valid group ids that mean something to SQL, PL/pgSQL, psycopg, Lua or Redis.
HOSTILE_GROUP_IDS = (
    "'; DROP TABLE pgque_fifo.messages; --",
    "' OR '1'='1",
    "$$; DROP SCHEMA pgque_fifo CASCADE; $$",
    "$tag$ $$",
    "\\",
    "\\'",
    '"; SELECT 1; --',
    "%s %(queue)s {}",
    "]]",
    "]] .. redis.call('FLUSHALL') .. [[",
    "redis.call('DEL', KEYS[1])",
    "{pgque:x}",
    "{pgque:default}:msg",
    "g:*",
    "\r\n*1\r\n$8\r\nFLUSHALL\r\n",
    "\x01\x7f\u202e\ufeff",
    "🙂 日本語",
    "x" * 512,
    "é" * 256,
)

#: Valid text that runs script if a page ever shows it unescaped (a dashboard's test data):
#: each payload sets ``window.__pwned`` or opens a dialog.
HOSTILE_MARKUP = (
    "<script>window.__pwned=1</script>",
    '"><script>window.__pwned=2</script>',
    "<img src=x onerror=window.__pwned=3>",
    "'><svg onload=window.__pwned=4>",
    "</pre></td><script>alert(5)</script>",
    "javascript:window.__pwned=6",
    '<a href="javascript:window.__pwned=7">x</a>',
    "{{7*7}} {% raw %} ${7*7}",
)

#: Group ids every method refuses: (why, value).
BAD_GROUP_IDS: tuple[tuple[str, Any], ...] = (
    ("empty", ""),
    ("NUL", "a\x00b"),
    ("513 bytes", "x" * 513),
    ("514 UTF-8 bytes", "é" * 257),
    ("lone surrogate", "g\ud800"),
    ("bytes", b"group"),
    ("int", 42),
    ("None", None),
    ("list", ["g"]),
)

_BAD_PRIORITIES: tuple[Any, ...] = (-1, 5, 2**63, 1.0, True, math.nan, "1", None)
_BAD_SECONDS: tuple[Any, ...] = (
    -1,
    -0.001,
    math.nan,
    math.inf,
    -math.inf,
    1e300,
    366 * 86400 + 1,
    "5",
    None,
    True,
    [1],
)
_BAD_COUNTS: tuple[Any, ...] = (0, -1, 10_001, 2**64, 1.0, True, "3", None, math.nan)
_BAD_IDS: tuple[Any, ...] = ("1,2", b"12", [1.5], [True], ["1"], 5, [None])
_BAD_REASONS: tuple[Any, ...] = (123, None, "a\x00b", "x" * 2001, "r\ud800", b"reason")
_BAD_HOLDERS: tuple[Any, ...] = (7, b"host", "h" * 201, "a\x00b", "h\ud800", ["h"])
#: settle_and_claim also takes a list of one holder per lease: bad are a list of another
#: length (these calls ask for one lease), and a list holding a bad holder.
_BAD_SETTLE_HOLDERS: tuple[Any, ...] = (
    *(value for value in _BAD_HOLDERS if not isinstance(value, list)),
    ["h", "i"],
    [],
    [7],
    ["a\x00b"],
    ("h" * 201,),
    {"h"},
)
_BAD_STATES: tuple[Any, ...] = ("stuck", "Ready", "", 0, True, ("ready",))
_BAD_AFTER_IDS: tuple[Any, ...] = ("5", 1.5, math.nan, True, b"1", [1])
_BAD_ERRORS: tuple[Any, ...] = (42, b"bytes", object(), ["e"], {"type": "e"})
_BAD_OUTCOMES: tuple[Any, ...] = ("finish", "ACK", "", None, 3)
_BAD_SETTLE_COUNTS: tuple[Any, ...] = (-1, 10_001, 2**64, 1.0, True, "3", None, math.nan)
_BAD_MESSAGE_IDS: tuple[Any, ...] = (0, -1, -(2**63), 1.0, True, False, "1", None, [1], math.nan)
_BAD_ENTRIES: tuple[Any, ...] = (
    "",
    "a\x00b",
    "x" * 201,
    "é" * 101,
    "e\ud800",
    b"entry",
    7,
    None,
    ["e"],
)
_BAD_TICKS: tuple[Any, ...] = (-1, -1e-9, math.nan, math.inf, -math.inf, "1", None, True, [1])


def _bad_events() -> list[tuple[str, Any]]:
    """Events that are not JSON-able Events (model_construct skips validation, as a careless
    subclass or a deserialiser might)."""
    return [
        ("NaN data", Event.model_construct(kind="k", data=math.nan)),
        ("infinite data", Event.model_construct(kind="k", data={"x": -math.inf})),
        ("set data", Event.model_construct(kind="k", data={1, 2})),
        ("bytes data", Event.model_construct(kind="k", data=b"\xff\xfe")),
        ("int key", Event.model_construct(kind="k", data={1: "x"})),
        ("object data", Event.model_construct(kind="k", data=object())),
        # Validation lets a lone surrogate into data; UTF-8 stores cannot take it.
        ("surrogate data", Event(kind="k", data="\ud800")),
        ("surrogate kind", Event.model_construct(kind="k\udfff", data={})),
        ("surrogate header", Event.model_construct(kind="k", data={}, headers={"h": "\ud800"})),
        ("a dict", {"kind": "k", "data": {}}),
        ("JSON text", '{"kind": "k"}'),
        ("None", None),
        ("beyond the limit", sized_event(DEFAULT_MAX_EVENT_BYTES + 1)),
    ]


def sized_event(size: int, kind: str = "sized") -> Event:
    """Return an event whose JSON text is exactly *size* UTF-8 bytes (at least ~150)."""
    base = Event(id="sized", kind=kind, data="")
    overhead = len(base.to_json().encode("utf-8"))
    return base.model_copy(update={"data": "x" * (size - overhead)})


#: One catalogue entry: (name, method name, positional arguments, keyword arguments).
Call = tuple[str, str, tuple[Any, ...], dict[str, Any]]


def bad_calls(lease: Lease, foreign: Lease | None) -> list[Call]:
    """Return every call of the catalogue; each must raise InvalidInput.

    *lease* is a lease of the transport under test (bad arguments go around it); *foreign* is a
    lease of another queue.
    """
    ok = Event(kind="ok")
    ok_ack = Settlement.ack(lease)
    calls: list[Call] = []

    def add(name: str, method: str, *args: Any, **kwargs: Any) -> None:
        calls.append((name, method, args, kwargs))

    for why, gid in BAD_GROUP_IDS:
        add(f"publish group {why}", "publish", gid, ok)
        add(f"publish_many group {why}", "publish_many", [("g", ok), (gid, ok)])
        add(f"unblock group {why}", "unblock", gid)
        add(f"group group {why}", "group", gid)
        add(f"pause group {why}", "pause", gid)
        add(f"resume group {why}", "resume", gid)
        if gid is not None:
            add(f"groups after {why}", "groups", after=gid)
    for value in _BAD_HOLDERS:
        add(f"claim holder {value!r}", "claim", 1.0, holder=value)
        add(f"claim_many holder {value!r}", "claim_many", 2, 1.0, holder=value)
    for value in _BAD_STATES:
        add(f"groups state {value!r}", "groups", state=value)
    for value in (*_BAD_COUNTS, 1001):
        add(f"groups limit {value!r}", "groups", limit=value)
    for value in _BAD_AFTER_IDS:
        add(f"dead_letters after {value!r}", "dead_letters", 10, after=value)
    for value in (*_BAD_IDS, None):
        add(f"delete_dead_letters ids {value!r}", "delete_dead_letters", value)
    for value in _BAD_ERRORS:
        add(f"nack error {type(value).__name__}", "nack", lease, error=value)
        add(f"dead_letter error {type(value).__name__}", "dead_letter", lease, "r", error=value)
    for why, event in _bad_events():
        add(f"publish event {why}", "publish", "g", event)
        add(f"publish_many event {why}", "publish_many", [("g", ok), ("g", event)])
    for items in ("gk", b"gk", [("g",)], [("g", ok, 1)], ["g"], [None], 7, None):
        add(f"publish_many items {items!r}", "publish_many", items)
    add("publish_many 10,001 items", "publish_many", [("g", ok)] * 10_001)
    for value in _BAD_PRIORITIES:
        add(f"publish priority {value!r}", "publish", "g", ok, priority=value)
        add(f"publish_many priority {value!r}", "publish_many", [("g", ok)], priority=value)
        add(f"claim min_priority {value!r}", "claim", 1.0, min_priority=value)
        add(f"claim_many min_priority {value!r}", "claim_many", 1, 1.0, min_priority=value)
    for value in _BAD_SECONDS:
        add(f"claim visibility {value!r}", "claim", value)
        add(f"claim_many visibility {value!r}", "claim_many", 2, value)
        add(f"nack delay {value!r}", "nack", lease, delay=value)
        add(f"extend visibility {value!r}", "extend", lease, value)
    for value in _BAD_COUNTS:
        add(f"claim_many n {value!r}", "claim_many", value)
        add(f"dead_letters limit {value!r}", "dead_letters", value)
    for value in _BAD_IDS:
        add(f"redrive ids {value!r}", "redrive", value)
    for value in _BAD_REASONS:
        add(f"dead_letter reason {value!r}", "dead_letter", lease, value)
    strangers: list[tuple[str, Any]] = [
        ("None", None),
        ("a str", "lease"),
        ("a dict", lease.model_dump()),
        ("another backend's", lease.model_copy(update={"origin": "elsewhere:" + lease.origin})),
        ("another queue's name", lease.model_copy(update={"queue": lease.queue + "x"})),
    ]
    if foreign is not None:
        strangers.append(("another queue's", foreign))
    for why, bad in strangers:
        add(f"ack {why} lease", "ack", bad)
        add(f"ack_many with {why} lease", "ack_many", [lease, bad])
        add(f"nack {why} lease", "nack", bad)
        add(f"extend {why} lease", "extend", bad, 10.0)
        add(f"dead_letter {why} lease", "dead_letter", bad, "r")
        add(f"release {why} lease", "release", bad)
        add(f"settle_and_claim {why} lease", "settle_and_claim", [ok_ack, Settlement.ack(bad)], 1)
    calls.extend(_bad_settle_calls(lease, ok_ack))
    return calls


def _bad_settle_calls(lease: Lease, ok: Settlement) -> list[Call]:
    """The catalogue's ``settle_and_claim`` entries (the bad settlement beside a good one)."""
    calls: list[Call] = []

    def add(name: str, *args: Any, **kwargs: Any) -> None:
        calls.append((f"settle_and_claim {name}", "settle_and_claim", args, kwargs))

    not_lists: tuple[Any, ...] = ("ack", b"ack", None, 7, ok, {"lease": lease})
    not_settlements: tuple[Any, ...] = (lease, None, "ack", ("ack", lease), lease.model_dump())
    for value in not_lists:
        add(f"settlements {type(value).__name__}", value, 1)
    for value in not_settlements:
        add(f"an item {type(value).__name__}", [ok, value], 1)
    add("10,001 settlements", [ok] * 10_001, 1)
    for value in _BAD_OUTCOMES:
        add(f"outcome {value!r}", [ok, Settlement(lease, value)], 1)
    add("a delay on an ack", [Settlement(lease, "ack", delay=1.0)], 1)
    add("a delay on a release", [Settlement(lease, "release", delay=1.0)], 1)
    add("a reason on a nack", [Settlement(lease, "nack", reason="r")], 1)
    add("a reason on a release", [Settlement(lease, "release", reason="r")], 1)
    add("an error on an ack", [Settlement(lease, "ack", error="e")], 1)
    for value in _BAD_SECONDS:
        add(f"nack delay {value!r}", [ok, Settlement.nack(lease, delay=value)], 1)
        add(f"visibility {value!r}", [ok], 1, value)
    for value in _BAD_REASONS:
        add(f"dead_letter reason {value!r}", [ok, Settlement.dead_letter(lease, value)], 1)
    for value in _BAD_ERRORS:
        name = type(value).__name__
        add(f"nack error {name}", [ok, Settlement.nack(lease, error=value)], 1)
        add(f"dead_letter error {name}", [ok, Settlement.dead_letter(lease, "r", error=value)], 1)
    for value in _BAD_SETTLE_COUNTS:
        add(f"n {value!r}", [ok], value)
    for value in _BAD_PRIORITIES:
        add(f"min_priority {value!r}", [ok], 1, min_priority=value)
    for value in _BAD_SETTLE_HOLDERS:
        add(f"holder {value!r}", [ok], 1, holder=value)
    return calls


def bad_schedule_calls() -> list[Call]:
    """Return the catalogue's calls of the scheduling methods (``Capabilities.scheduling``):
    delayed publishes, ``cancel``, ``scheduled``, ``publish_tick`` and ``last_tick``; each must
    raise InvalidInput."""
    ok = Event(kind="ok")
    calls: list[Call] = []

    def add(name: str, method: str, *args: Any, **kwargs: Any) -> None:
        calls.append((name, method, args, kwargs))

    for value in _BAD_SECONDS:
        add(f"publish delay {value!r}", "publish", "g", ok, delay=value)
        add(f"publish_many delay {value!r}", "publish_many", [("g", ok)], delay=value)
    for why, gid in BAD_GROUP_IDS:
        add(f"delayed publish group {why}", "publish", gid, ok, delay=1.0)
        add(f"delayed publish_many group {why}", "publish_many", [("g", ok), (gid, ok)], delay=1.0)
        add(f"publish_tick group {why}", "publish_tick", "e", 1.0, gid, ok)
    for why, event in _bad_events():
        add(f"delayed publish event {why}", "publish", "g", event, delay=1.0)
        add(f"publish_tick event {why}", "publish_tick", "e", 1.0, "g", event)
    for value in _BAD_PRIORITIES:
        add(f"delayed publish priority {value!r}", "publish", "g", ok, priority=value, delay=1.0)
        add(f"publish_tick priority {value!r}", "publish_tick", "e", 1.0, "g", ok, priority=value)
    for value in _BAD_MESSAGE_IDS:
        add(f"cancel id {value!r}", "cancel", value)
    for value in (*_BAD_COUNTS, 1001):
        add(f"scheduled limit {value!r}", "scheduled", limit=value)
    for value in _BAD_AFTER_IDS:
        add(f"scheduled after {value!r}", "scheduled", after=value)
    for value in _BAD_ENTRIES:
        add(f"publish_tick entry {value!r}", "publish_tick", value, 1.0, "g", ok)
        add(f"last_tick entry {value!r}", "last_tick", value)
    for value in _BAD_TICKS:
        add(f"publish_tick tick {value!r}", "publish_tick", "e", value, "g", ok)
    add("delayed publish_many 10,001 items", "publish_many", [("g", ok)] * 10_001, delay=1.0)
    return calls


async def _refused(t: AsyncTransport, call: Call) -> None:
    """Make *call* on *t*; fail (naming the entry) unless it raises InvalidInput."""
    name, method, args, kwargs = call
    try:
        await getattr(t, method)(*args, **kwargs)
    except InvalidInput:
        return
    except Exception as exc:
        kind = type(exc).__name__
        raise AssertionError(f"{name}: {kind} instead of InvalidInput: {exc}") from exc
    raise AssertionError(f"{name}: accepted instead of raising InvalidInput")


async def _seed(t: AsyncTransport) -> list[tuple[str, Event]]:
    """Publish a few messages over three groups; return them in publish order."""
    published = [(f"g{n % 3}", Event(kind="seed", data={"n": n})) for n in range(9)]
    for group_id, event in published[:5]:
        await t.publish(group_id, event)
    await t.publish_many(published[5:])
    return published


async def _assert_intact(t: AsyncTransport, published: list[tuple[str, Event]]) -> None:
    """Drain *t* and check every published event comes out once, in its group's order."""
    stats = await t.stats()
    assert stats.messages == len(published)
    assert stats.dead_letters == 0
    assert stats.blocked == 0
    seen: dict[str, list[Event]] = {}
    for _ in range(len(published) + 1):
        leases = await t.claim_many(10, 30.0)
        if not leases:
            break
        for lease in leases:
            seen.setdefault(lease.group_id, []).append(lease.event)
        assert await t.ack_many(leases) == [True] * len(leases)
    expected: dict[str, list[Event]] = {}
    for group_id, event in published:
        expected.setdefault(group_id, []).append(event)
    assert seen == expected
    after = await t.stats()
    assert (after.groups, after.messages, after.in_flight, after.dead_letters) == (0, 0, 0, 0)


@pytest.mark.asyncio  # async-only
async def test_catalogue_of_bad_input_leaves_the_queue_intact(
    async_transport_factory: AsyncTransportFactory,
) -> None:
    t = await async_transport_factory()
    other = await async_transport_factory()
    published = await _seed(t)
    lease = await t.claim(60.0)
    assert lease is not None
    await other.publish("g", Event(kind="elsewhere"))
    foreign = await other.claim(60.0)
    calls = bad_calls(lease, foreign)
    assert len(calls) > 150
    for call in calls:
        await _refused(t, call)
    # Nothing moved: the lease is still held, the other queue untouched.
    stats = await t.stats()
    assert (stats.messages, stats.in_flight, stats.dead_letters) == (len(published), 1, 0)
    assert await t.extend(lease, 30.0) is not None
    assert await t.ack(lease)
    assert foreign is not None
    assert await other.ack(foreign)
    assert (await other.stats()).messages == 0
    await _assert_intact(t, published[1:])


@pytest.mark.asyncio  # async-only
async def test_catalogue_is_refused_before_any_io(request: pytest.FixtureRequest) -> None:
    try:
        offline: AsyncTransport = request.getfixturevalue("offline_async_transport")
    except pytest.FixtureLookupError:
        pytest.skip("this backend does no I/O (no offline_async_transport fixture)")
    lease = Lease(
        group_id="g",
        message_id=1,
        event=Event(kind="k"),
        token="t",
        priority=0,
        attempt=1,
        expires_at=0.0,
        queue=offline.queue,
        origin=_origin(offline),
    )
    for call in bad_calls(lease, None):
        # A ConnectionLost here would mean the call went to the server before checking.
        await _refused(offline, call)
    # The control: the same lease with good arguments passes every check and goes to the
    # (missing) server, so the refusals above came from the checks, not from the lease.
    with pytest.raises(ConnectionLost):
        await offline.ack(lease)
    with pytest.raises(ConnectionLost):
        await offline.settle_and_claim([Settlement.ack(lease)], 1)


@pytest.mark.asyncio  # async-only
async def test_scheduling_catalogue_leaves_the_queue_intact(
    async_transport_factory: AsyncTransportFactory,
) -> None:
    t = await async_transport_factory()
    if not t.capabilities.scheduling:
        pytest.skip("the transport does not declare capability 'scheduling'")
    published = await _seed(t)
    scheduled = await t.publish("g0", Event(kind="later"), delay=3600.0)
    tick = Event(kind="tick")
    assert await t.publish_tick("e", 1.0, "tick", tick) is not None
    calls = bad_schedule_calls()
    assert len(calls) > 100
    for call in calls:
        await _refused(t, call)
    assert [m.id for m in await t.scheduled()] == [scheduled]
    assert await t.last_tick("e") == 1.0
    assert (await t.stats()).scheduled == 1
    assert await t.cancel(scheduled) is True
    await _assert_intact(t, [*published, ("tick", tick)])


@pytest.mark.asyncio  # async-only
async def test_scheduling_catalogue_is_refused_before_any_io(
    request: pytest.FixtureRequest,
) -> None:
    try:
        offline: AsyncTransport = request.getfixturevalue("offline_async_transport")
    except pytest.FixtureLookupError:
        pytest.skip("this backend does no I/O (no offline_async_transport fixture)")
    if not offline.capabilities.scheduling:
        pytest.skip("the transport does not declare capability 'scheduling'")
    for call in bad_schedule_calls():
        # A ConnectionLost here would mean the call went to the server before checking.
        await _refused(offline, call)
    # The control: good arguments go to the (missing) server.
    with pytest.raises(ConnectionLost):
        await offline.publish("g", Event(kind="k"), delay=1.0)
    with pytest.raises(ConnectionLost):
        await offline.cancel(1)
    with pytest.raises(ConnectionLost):
        await offline.publish_tick("e", 1.0, "g", Event(kind="k"))


def _entry_for(text: str) -> str:
    """*text* cut to fit an entry name (200 UTF-8 bytes)."""
    while len(text.encode("utf-8")) > 200:
        text = text[:-1]
    return text


@pytest.mark.asyncio  # async-only
async def test_hostile_entries_and_groups_round_trip_through_scheduling(
    async_transport_factory: AsyncTransportFactory,
) -> None:
    t = await async_transport_factory()
    if not t.capabilities.scheduling:
        pytest.skip("the transport does not declare capability 'scheduling'")
    ticked: list[tuple[str, Event]] = []
    later: dict[int, tuple[str, Event]] = {}
    for n, text in enumerate(HOSTILE_GROUP_IDS):
        entry = _entry_for(text)
        event = Event(id=f"tick-{n}", kind=text[:256], data={text: text}, headers={"h": text})
        assert await t.publish_tick(entry, 60.0 * n, text, event) is not None
        assert await t.publish_tick(entry, 60.0 * n, text, event) is None
        assert await t.last_tick(entry) == 60.0 * n
        ticked.append((text, event))
        delayed = Event(id=f"later-{n}", kind=text[:256], data=[text])
        later[await t.publish(text, delayed, priority=n % 5, delay=3600.0)] = (text, delayed)
    listed = await t.scheduled(limit=1000)
    assert [m.id for m in listed] == sorted(later)
    for message in listed:
        group_id, event = later[message.id]
        assert (message.group_id, message.kind) == (group_id, event.kind)
        assert message.priority == HOSTILE_GROUP_IDS.index(group_id) % 5
    for message_id in later:
        assert await t.cancel(message_id) is True
    assert (await t.stats()).scheduled == 0
    await _assert_intact(t, ticked)


def _origin(t: AsyncTransport) -> str:
    """Return an origin of *t*'s backend (memory's store; ``redis:``/``postgresql:`` and a store
    the offline transport cannot know, so only its backend is checked before any I/O)."""
    origin = getattr(getattr(t, "store", None), "origin", None)
    if origin is not None:
        return str(origin)
    backend = "redis" if "redis" in type(t).__name__.lower() else "postgresql"
    return f"{backend}:offline"


@pytest.mark.asyncio  # async-only
async def test_forged_leases_are_fenced_out(async_transport_factory: AsyncTransportFactory) -> None:
    t = await async_transport_factory()
    other = await async_transport_factory()
    published = await _seed(t)
    lease = await t.claim(60.0)
    assert lease is not None
    await other.publish("g0", Event(kind="elsewhere"))
    foreign = await other.claim(60.0)
    assert foreign is not None
    forged = [
        lease.model_copy(update={"token": "0" * len(lease.token)}),
        lease.model_copy(update={"token": lease.token + "'; --"}),
        lease.model_copy(update={"token": ""}),
        lease.model_copy(update={"message_id": lease.message_id + 1}),
        lease.model_copy(update={"message_id": -1}),
        lease.model_copy(update={"message_id": 2**63 - 1}),
        lease.model_copy(update={"group_id": "g1"}),
        lease.model_copy(update={"group_id": "'; DROP TABLE pgque_fifo.groups; --"}),
        # Another queue's lease with its queue and origin rewritten to look like ours.
        foreign.model_copy(update={"queue": lease.queue, "origin": lease.origin}),
    ]
    for fake in forged:
        assert await t.ack(fake) is False, fake
        assert await t.nack(fake, delay=5.0) is False, fake
        assert await t.extend(fake, 600.0) is None, fake
        assert await t.dead_letter(fake, "forged") is False, fake
        assert await t.release(fake) is False, fake
    assert await t.ack_many(forged) == [False] * len(forged)
    fenced = await t.settle_and_claim(
        [
            settle(fake)
            for fake in forged
            for settle in (
                Settlement.ack,
                lambda x: Settlement.nack(x, delay=5.0, error="forged"),
                Settlement.release,
                lambda x: Settlement.dead_letter(x, "forged"),
            )
        ],
        0,
    )
    assert fenced.settled == [False] * 4 * len(forged)
    stats = await t.stats()
    assert (stats.messages, stats.in_flight, stats.parked, stats.dead_letters) == (9, 1, 0, 0)
    assert await t.ack(lease)
    assert await other.ack(foreign)
    await _assert_intact(t, published[1:])


@pytest.mark.asyncio  # async-only
async def test_hostile_text_round_trips_as_plain_data(
    async_transport_factory: AsyncTransportFactory,
) -> None:
    t = await async_transport_factory(max_attempts=5)
    published: list[tuple[str, Event]] = []
    for n, text in enumerate(HOSTILE_GROUP_IDS):
        event = Event(
            id=f"{n}-{text[:200]}",
            kind=text[:256],
            data={text: [text, {"nested": text}], "n": n},
            headers={text[:100]: text},
        )
        published.append((text, event))
        await t.publish(text, event, priority=n % 5)
    # The same again in one batch: the second message of every group.
    again = [
        (text, event.model_copy(update={"id": f"again-{n}"}))
        for n, (text, event) in enumerate(published)
    ]
    await t.publish_many(again)
    stats = await t.stats()
    assert (stats.groups, stats.messages) == (len(HOSTILE_GROUP_IDS), 2 * len(HOSTILE_GROUP_IDS))
    leases = await t.claim_many(len(HOSTILE_GROUP_IDS), 60.0)
    assert sorted(lease.group_id for lease in leases) == sorted(HOSTILE_GROUP_IDS)
    heads = dict(published)
    for lease in leases:
        assert lease.event == heads[lease.group_id]
        assert lease.priority == HOSTILE_GROUP_IDS.index(lease.group_id) % 5
    # A hostile reason is stored and shown verbatim, and the dead letter comes back.
    victim = leases[0]
    assert await t.dead_letter(victim, victim.group_id)
    [dead] = await t.dead_letters()
    assert (dead.group_id, dead.reason, dead.event) == (
        victim.group_id,
        victim.group_id,
        victim.event,
    )
    assert await t.unblock(victim.group_id) is False
    assert await t.redrive([dead.id]) == 1
    assert await t.ack_many(leases[1:]) == [True] * (len(leases) - 1)
    # What is left: every group's second message, the victim's head back ahead of its own
    # (an in-place redrive keeps the group's order).
    left = [(victim.group_id, victim.event), *again]
    await _assert_intact(t, left)


@pytest.mark.asyncio  # async-only
async def test_events_beyond_max_event_bytes_are_refused(
    async_transport_factory: AsyncTransportFactory,
) -> None:
    t = await async_transport_factory(max_event_bytes=MIB)
    fits = sized_event(MIB)
    assert len(fits.to_json().encode("utf-8")) == MIB
    big = sized_event(10 * MIB, kind="big")
    with pytest.raises(InvalidInput, match="max_event_bytes"):
        await t.publish("g", big)
    with pytest.raises(InvalidInput, match="max_event_bytes"):
        await t.publish("g", sized_event(MIB + 1))
    # A batch with one event too many bytes is refused whole.
    with pytest.raises(InvalidInput, match="max_event_bytes"):
        await t.publish_many([("g", Event(kind="small")), ("h", big)])
    # Multi-byte text is counted in UTF-8 bytes, not characters.
    wide = fits.model_copy(update={"data": "é" * (MIB // 2)})
    with pytest.raises(InvalidInput, match="max_event_bytes"):
        await t.publish("g", wide)
    assert (await t.stats()).messages == 0
    await t.publish("g", fits)
    lease = await t.claim(30.0)
    assert lease is not None
    assert lease.event == fits
    assert await t.ack(lease)
    # The default limit (8 MiB) lets a 1 MiB event through and refuses one just beyond it.
    default = await async_transport_factory()
    with pytest.raises(InvalidInput, match="max_event_bytes"):
        await default.publish("g", sized_event(DEFAULT_MAX_EVENT_BYTES + 1))
    await _assert_intact(t, [])


@pytest.mark.asyncio  # async-only
async def test_invalid_max_event_bytes_is_refused(
    async_transport_factory: AsyncTransportFactory,
) -> None:
    for value in (0, -1, True, 1.5, "1", 2**40):
        with pytest.raises((InvalidInput, ConfigurationError)) as caught:
            await async_transport_factory(max_event_bytes=value)
        assert isinstance(caught.value, PgqueError)
