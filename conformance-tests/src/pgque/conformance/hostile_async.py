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

The catalogue itself (the hostile text, the bad values, the calls) is data, shared by both
twins: :mod:`pgque.conformance._hostile_input`.
"""

# The source of its blocking twin, hostile_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._hostile_input import (
    BAD_GROUP_IDS,
    HOSTILE_GROUP_IDS,
    HOSTILE_MARKUP,
    MIB,
    Call,
    bad_calls,
    bad_schedule_calls,
    sized_event,
)
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
