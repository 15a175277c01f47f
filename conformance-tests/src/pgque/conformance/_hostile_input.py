"""The hostile-input catalogue as data, without I/O: the hostile but valid text every
transport must round-trip (:data:`HOSTILE_GROUP_IDS`, :data:`HOSTILE_MARKUP`), the bad values
of each kind of argument, and the calls built from them (:func:`bad_calls`,
:func:`bad_schedule_calls`), each of which must raise :class:`~pgque.core.InvalidInput`.

Both hostile-input suites, ``hostile_async`` and its blocking twin ``hostile_sync``, make these
calls; they are written once, here.
"""

from __future__ import annotations

import math
from typing import Any

from pgque.core import Event, Lease, Settlement
from pgque.core.validation import DEFAULT_MAX_EVENT_BYTES

__all__ = [
    "MIB",
    "HOSTILE_GROUP_IDS",
    "HOSTILE_MARKUP",
    "BAD_GROUP_IDS",
    "Call",
    "bad_calls",
    "bad_schedule_calls",
    "sized_event",
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
