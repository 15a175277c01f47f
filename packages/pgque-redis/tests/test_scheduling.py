"""Issue 17 on Redis: scheduled (delayed) messages and tick records, as the Lua scripts keep
them: the bounded moves of due messages by claims, places in a group, atomicity, purge, and the
idle wait capped at the next due time."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis

from pgque.conformance.clock import FakeClock
from pgque.core import Event, InMemoryTransport, InvalidInput
from pgque.redis import AsyncRedisTransport, RedisTransport
from pgque.redis._scripts import load_scripts


def _drain(transport: RedisTransport) -> list[tuple[str, int]]:
    """Claim and ack until nothing is claimable; return (group, message id) in claim order."""
    seen: list[tuple[str, int]] = []
    while (lease := transport.claim()) is not None:
        seen.append((lease.group_id, lease.message_id))
        assert transport.ack(lease)
    return seen


def test_a_scheduled_message_joins_the_tail_at_its_due_time(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    s = transport.publish("g", Event(kind="s"), delay=10)
    clock.advance(5)
    a = transport.publish("g", Event(kind="a"))
    clock.advance(6)
    b = transport.publish("g", Event(kind="b"))
    assert s < a < b
    assert _drain(transport) == [("g", a), ("g", s), ("g", b)]


def test_claims_move_a_backlog_of_due_messages_in_bounded_batches_in_id_order(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    ids = transport.publish_many([("g", Event(kind="k"))] * 1200, delay=1)
    # Ids cross from 9 to 10 digits nowhere here, but from 1 to 4: keys must sort by id.
    assert ids == sorted(ids)
    sched = transport.key_prefix + "sched"
    assert raw_client.zcard(sched) == 1200
    clock.advance(1)
    first = transport.claim()
    assert first is not None
    assert first.message_id == ids[0]
    assert raw_client.zcard(sched) == 200  # one claim moved 1,000, the oldest due first
    assert transport.ack(first)
    rest = _drain(transport)
    assert raw_client.zcard(sched) == 0
    assert [mid for _gid, mid in rest] == ids[1:]


def test_due_messages_of_one_time_join_in_id_order_across_key_widths(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    ids = transport.publish_many([("g", Event(kind="k"))] * 12, delay=2)  # ids 1..12
    clock.advance(2)
    assert [mid for _gid, mid in _drain(transport)] == ids


def test_publish_many_with_a_delay_and_one_bad_item_schedules_nothing(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    items = [("g", Event(kind="k")), ("", Event(kind="k")), ("h", Event(kind="k"))]
    with pytest.raises(InvalidInput):
        transport.publish_many(items, delay=5)
    assert transport.stats().scheduled == 0
    assert raw_client.keys(transport.key_prefix.replace("{", "\\{") + "*") == []
    later = transport.publish("g", Event(kind="k"), delay=5)
    assert later == 1  # no id was spent


def test_a_scheduled_only_group_does_not_exist_until_due(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    mid = transport.publish("g", Event(kind="k"), priority=3, delay=5)
    assert transport.group("g") is None
    assert transport.groups() == []
    assert transport.claim() is None
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.scheduled) == (0, 0, 1)
    assert stats.next_due_at == clock() + 5
    assert transport.queue in transport.queues()
    clock.advance(5)
    info = transport.group("g")
    assert info is not None
    assert (info.depth, info.priority, info.head_message_id) == (1, 3, mid)
    assert info.head_enqueued_at == clock()
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.scheduled, stats.next_due_at) == (1, 1, 0, None)


def test_cancel_drops_only_a_not_yet_due_scheduled_message(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    soon = transport.publish("g", Event(kind="k"), delay=1)
    later = transport.publish("g", Event(kind="k"), delay=10)
    plain = transport.publish("h", Event(kind="k"))
    clock.advance(1)
    assert transport.cancel(soon) is False  # due, though no call moved it yet
    assert transport.cancel(plain) is False
    assert transport.cancel(2**60) is False
    assert transport.cancel(later) is True
    assert transport.cancel(later) is False
    for bad in (0, -1, True, 1.0, "1"):
        with pytest.raises(InvalidInput):
            transport.cancel(bad)  # type: ignore[arg-type]
    assert _drain(transport) == [("g", soon), ("h", plain)]


def test_scheduled_pages_by_id_and_passes_over_due_ones(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    start = clock()
    ids = [transport.publish(f"g{i}", Event(kind=f"k{i}"), delay=20 - i) for i in range(12)]
    clock.advance(9.5)  # only ids[11] (delay 9) is due
    page = transport.scheduled(limit=5)
    assert [m.id for m in page] == ids[:5]
    assert page[0].group_id == "g0"
    assert (page[0].due_at, page[0].kind, page[0].enqueued_at) == (start + 20, "k0", start)
    rest = transport.scheduled(limit=100, after=page[-1].id)
    assert [m.id for m in rest] == ids[5:11]
    assert transport.scheduled(after=2**62) == []
    with pytest.raises(InvalidInput):
        transport.scheduled(limit=0)


def test_publish_tick_records_the_tick_and_appends_after_due_messages(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    s = transport.publish("g", Event(kind="s"), delay=1)
    clock.advance(2)
    assert transport.last_tick("e") is None
    first = transport.publish_tick("e", 100.5, "g", Event(kind="tick"))
    assert first is not None
    assert transport.publish_tick("e", 100.5, "g", Event(kind="tick")) is None
    assert transport.publish_tick("e", 99.0, "g", Event(kind="tick")) is None
    assert transport.last_tick("e") == 100.5
    second = transport.publish_tick("e", 160.25, "g", Event(kind="tick"))
    assert second is not None
    assert transport.last_tick("e") == 160.25
    assert transport.last_tick("other") is None
    assert _drain(transport) == [("g", s), ("g", first), ("g", second)]


def test_redrive_to_the_tail_moves_due_ones_first_and_in_place_keeps_the_joined_place(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock, max_attempts=None)
    s = transport.publish("g", Event(kind="s"), delay=5)
    a = transport.publish("g", Event(kind="a"))
    clock.advance(5)
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == a
    assert transport.dead_letter(lease, "r")
    # s joined behind a; a goes back in place (ahead of s), b comes behind both.
    assert transport.redrive() == 1
    b = transport.publish("g", Event(kind="b"))
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == a
    assert transport.ack(lease)
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == s
    assert transport.dead_letter(lease, "r")
    # s, redriven in place, returns to its joined place: still ahead of b.
    assert transport.redrive() == 1
    assert _drain(transport) == [("g", s), ("g", b)]
    # To the tail: a due message of the group joins before the redriven one.
    t = transport.publish("g", Event(kind="t"))
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == t
    assert transport.dead_letter(lease, "r")
    u = transport.publish("g", Event(kind="u"), delay=1)
    clock.advance(1)
    assert transport.redrive(in_place=False) == 1
    order = _drain(transport)
    assert order[0] == ("g", u)
    assert len(order) == 2
    assert order[1][1] > t  # t, published anew (a new id, after u)


def test_purge_deletes_scheduled_messages_and_tick_records(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    transport.publish_many([("g", Event(kind="k")), ("h", Event(kind="k"))], delay=30)
    assert transport.publish_tick("e", 1.0, "g", Event(kind="k")) is not None
    transport.purge()
    assert transport.stats().scheduled == 0
    assert transport.last_tick("e") is None
    pattern = transport.key_prefix.replace("{", "\\{") + "*"
    names = [key.decode() if isinstance(key, bytes) else key for key in raw_client.keys(pattern)]
    left = sorted(name[len(transport.key_prefix) :] for name in names)
    assert left == ["meta", "seq"]  # the meta key stays: the queue exists on this node
    assert transport.publish_tick("e", 1.0, "g", Event(kind="k")) is not None


def test_an_idle_wait_ends_at_the_next_due_time(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    producer = transport_factory(queue=transport.queue)
    assert transport.wait_for_messages(0) is True  # the first wait subscribes
    published = time.monotonic()
    producer.publish("g", Event(kind="k"), delay=0.4)
    while transport.wait_for_messages(0.05):  # hear that publish's wake-up
        pass
    assert transport.wait_for_messages(30) is True
    assert 0.4 - 0.05 < time.monotonic() - published < 0.4 + 0.1
    lease = transport.claim()
    assert lease is not None


def test_a_delayed_publish_wakes_a_waiter_that_then_waits_for_the_due_time(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    producer = transport_factory(queue=transport.queue)
    assert transport.wait_for_messages(0) is True
    woke = threading.Event()
    claimed: list[float] = []

    def worker() -> None:
        woke.set()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            transport.wait_for_messages(30)
            if transport.claim() is not None:
                claimed.append(time.monotonic())
                return

    thread = threading.Thread(target=worker)
    thread.start()
    woke.wait()
    time.sleep(0.2)  # the worker now waits with nothing scheduled: 30 seconds
    published = time.monotonic()
    producer.publish("g", Event(kind="k"), delay=0.5)
    thread.join(10)
    assert claimed
    late = claimed[0] - (published + 0.5)
    assert -0.05 < late < 0.1


@pytest.mark.asyncio
async def test_the_async_idle_wait_ends_at_the_next_due_time(
    async_transport_factory: Callable[..., Awaitable[AsyncRedisTransport]],
) -> None:
    transport = await async_transport_factory()
    await transport.wait_for_messages(0)  # subscribes
    loop = asyncio.get_running_loop()
    published = loop.time()
    await transport.publish("g", Event(kind="k"), delay=0.4)
    while await transport.wait_for_messages(0.05):
        pass
    assert await transport.wait_for_messages(30) is True
    assert 0.4 - 0.05 < loop.time() - published < 0.4 + 0.1
    assert await transport.claim() is not None


def test_an_ack_keeps_the_round_robin_place_of_a_group_a_due_message_keeps_busy(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    a = transport.publish("g", Event(kind="a"))
    s = transport.publish("g", Event(kind="s"), priority=2, delay=5)
    lease_a = transport.claim()
    assert lease_a is not None
    assert lease_a.message_id == a
    clock.advance(10)
    transport.publish("h", Event(kind="h"))  # never served: claimable since 0
    assert transport.ack(lease_a)
    # g never emptied (s joined at its due time): it was served now, so h goes first.
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == "h"
    lease = transport.claim()
    assert lease is not None
    assert (lease.group_id, lease.message_id, lease.priority) == ("g", s, 0)


def test_pause_of_a_group_whose_only_message_is_due_keeps_that_message_and_its_priority(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    s = transport.publish("g", Event(kind="s"), priority=3, delay=5)
    clock.advance(5)
    assert transport.pause("g") is True
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.depth, info.priority, info.head_message_id) == ("paused", 1, 3, s)
    assert transport.claim() is None
    assert transport.resume("g") is True
    assert _drain(transport) == [("g", s)]


def test_a_claim_that_moves_due_messages_wakes_idle_workers(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    listener = transport_factory(queue=transport.queue)
    listener.wait_for_messages(0)  # subscribes
    due = time.monotonic() + 0.3
    transport.publish_many([("g", Event(kind="k")), ("h", Event(kind="k"))], delay=0.3)
    while listener.wait_for_messages(0.05):  # the publish's wake-up
        pass
    time.sleep(max(0.0, due - time.monotonic()) + 0.05)
    assert transport.claim() is not None  # moves both in, leases one
    # Nothing is scheduled any more, so only a wake-up ends this wait early.
    began = time.monotonic()
    assert listener.wait_for_messages(5) is True
    assert time.monotonic() - began < 1
    assert listener.claim() is not None


class _CountingRedis(redis.Redis):
    """A real client that records the SHA of every script it runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shas: list[str] = []

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        self.shas.append(sha)
        return super().evalsha(sha, numkeys, *keys_and_args)


def test_stats_moves_a_backlog_of_due_messages_a_thousand_per_script(
    redis_url: str, new_queue: Callable[[], str]
) -> None:
    clock = FakeClock()
    client = _CountingRedis.from_url(redis_url)
    assert isinstance(client, _CountingRedis)
    transport = RedisTransport(client=client, queue=new_queue(), clock=clock)
    try:
        for start in range(0, 2500, 500):
            items = [(f"g{(start + i) % 7}", Event(kind="k")) for i in range(500)]
            transport.publish_many(items, delay=1)
        clock.advance(1)
        for script in load_scripts().values():  # so that no NOSCRIPT reload is counted
            client.script_load(script.text)
        client.shas.clear()
        stats = transport.stats()
        assert (stats.messages, stats.groups, stats.scheduled) == (2500, 7, 0)
        join, count = load_scripts()["join_due"].sha, load_scripts()["stats"].sha
        # The stats script moves 1,000 and finds more due; two join_due calls move the rest.
        assert client.shas == [count, join, join, count]
        client.shas.clear()
        assert transport.stats() == stats
        assert client.shas == [count]  # nothing due: one script, as always
    finally:
        transport.close()
        client.close()


def test_groups_lists_the_groups_of_a_backlog_of_due_messages(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish_many([(f"g{i % 3}", Event(kind="k")) for i in range(1500)], delay=1)
    clock.advance(1)
    page = transport.groups()
    assert [(info.group_id, info.depth) for info in page] == [("g0", 500), ("g1", 500), ("g2", 500)]


def test_scheduled_ids_beyond_fourteen_digits_round_trip(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    raw_client.set(transport.key_prefix + "seq", 2**52)  # ids of 16 digits
    first, second = transport.publish_many([("g", Event(kind="k"))] * 2, delay=5)
    assert (first, second) == (2**52 + 1, 2**52 + 2)
    assert [m.id for m in transport.scheduled()] == [first, second]
    assert transport.cancel(second) is True
    clock.advance(5)
    lease = transport.claim()
    assert lease is not None
    assert lease.message_id == first


def test_redrive_in_place_into_a_group_only_a_due_message_would_create_takes_its_priority(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    x = transport.publish("g", Event(kind="x"), priority=1)
    s = transport.publish("g", Event(kind="s"), priority=4, delay=5)
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "r")  # g is gone: its only message was x
    clock.advance(5)
    # s joined g at its due time (creating it with priority 4); x goes back ahead of it.
    assert transport.redrive() == 1
    info = transport.group("g")
    assert info is not None
    assert (info.priority, info.depth, info.head_message_id) == (4, 2, x)
    assert _drain(transport) == [("g", x), ("g", s)]


def _bounded_transport(redis_url: str, queue: str, clock: FakeClock) -> RedisTransport:
    """A transport whose every command gives up after 5 seconds (a stuck script fails the test
    instead of hanging it), with no retry."""
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    return RedisTransport(client=client, queue=queue, clock=clock, retries=0)


@pytest.mark.parametrize("first", ["publish", "claim", "group", "pause", "scheduled"])
def test_a_scheduled_message_whose_hash_vanished_holds_up_nothing(
    redis_url: str, new_queue: Callable[[], str], raw_client: redis.Redis, first: str
) -> None:
    """Its ``s:`` hash deleted outside pgque (eviction, a manual DEL), a due message is dropped
    from every index; no script loops on it, and its group's other messages keep their order."""
    clock = FakeClock()
    transport = _bounded_transport(redis_url, new_queue(), clock)
    try:
        a = transport.publish("g", Event(kind="a"))
        lost = transport.publish("g", Event(kind="lost"), delay=5)
        kept = transport.publish("g", Event(kind="kept"), delay=5)
        later = transport.publish("g", Event(kind="later"), delay=50)
        gone_later = transport.publish("g", Event(kind="gone-later"), delay=50)
        p = transport.key_prefix
        assert raw_client.delete(p + f"s:{lost:016d}", p + f"s:{gone_later:016d}") == 2
        clock.advance(5)
        if first == "publish":
            b = transport.publish("g", Event(kind="b"))
        elif first == "claim":
            lease = transport.claim()
            assert lease is not None
            assert lease.message_id == a
            assert transport.release(lease)
            b = transport.publish("g", Event(kind="b"))
        elif first == "group":
            info = transport.group("g")
            assert info is not None
            assert (info.depth, info.head_message_id) == (2, a)
            b = transport.publish("g", Event(kind="b"))
        elif first == "pause":
            assert transport.pause("g")
            assert transport.resume("g")
            b = transport.publish("g", Event(kind="b"))
        else:
            assert [m.id for m in transport.scheduled()] == [later]
            b = transport.publish("g", Event(kind="b"))
        assert transport.cancel(gone_later) is False  # nothing left to cancel
        assert [m.id for m in transport.scheduled()] == [later]
        stats = transport.stats()
        assert (stats.messages, stats.scheduled) == (3, 1)
        assert _drain(transport) == [("g", a), ("g", kept), ("g", b)]
        # later's entry, and gone_later's until it falls due (cancel could not tell its group).
        assert raw_client.zrange(p + "sq:g", 0, -1) == [
            f"{later:016d}".encode(),
            f"{gone_later:016d}".encode(),
        ]
        clock.advance(50)
        assert _drain(transport) == [("g", later)]
        assert raw_client.exists(p + "sched", p + "sids", p + "sq:g") == 0
    finally:
        transport.close()
        transport.client.close()


def test_scheduled_moves_a_backlog_of_due_messages_first_rather_than_reading_past_it(
    redis_url: str, new_queue: Callable[[], str]
) -> None:
    """A page never reads more than a batch of due hashes in one script: with more due, the
    script moves a thousand and answers "join first"; join_due scripts move the rest."""
    clock = FakeClock()
    client = _CountingRedis.from_url(redis_url)
    assert isinstance(client, _CountingRedis)
    transport = RedisTransport(client=client, queue=new_queue(), clock=clock)
    try:
        for start in range(0, 2500, 500):
            items = [(f"g{(start + i) % 7}", Event(kind="k")) for i in range(500)]
            transport.publish_many(items, delay=1)
        waiting = transport.publish_many([("w", Event(kind="w"))] * 3, delay=10)
        clock.advance(1)
        for script in load_scripts().values():  # so that no NOSCRIPT reload is counted
            client.script_load(script.text)
        client.shas.clear()
        assert [m.id for m in transport.scheduled()] == waiting
        join, page = load_scripts()["join_due"].sha, load_scripts()["scheduled"].sha
        assert client.shas == [page, join, join, page]
        assert transport.stats().messages == 2500
        client.shas.clear()
        assert [m.id for m in transport.scheduled(after=waiting[0])] == waiting[1:]
        assert client.shas == [page]  # nothing due: one script, as always
    finally:
        transport.close()
        client.close()


def test_a_claim_that_drains_a_group_first_moves_in_its_due_message_beyond_the_batch(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    """g's head is exhausted and dead-lettered by a claim while g's due message S is behind a
    thousand earlier-due ones (beyond the claim's batch): S joins g before g is found empty,
    so it keeps g (and its priority) and is leased by that claim, as on the reference model."""

    def run(transport: RedisTransport | InMemoryTransport, clock: FakeClock) -> list[object]:
        h = transport.publish("g", Event(kind="h"))
        lease = transport.claim(visibility=1)
        assert lease is not None
        assert lease.message_id == h
        xs = transport.publish_many([("x", Event(kind="x"))] * 1000, delay=5)
        s = transport.publish("g", Event(kind="s"), priority=3, delay=10)
        clock.advance(10)
        leases = transport.claim_many(2)
        assert [d.message_id for d in transport.dead_letters()] == [h]
        return [xs[0], s, [(x.group_id, x.message_id, x.priority) for x in leases]]

    redis_clock, memory_clock = FakeClock(), FakeClock()
    on_redis = run(transport_factory(clock=redis_clock, max_attempts=1), redis_clock)
    on_memory = run(InMemoryTransport(clock=memory_clock, max_attempts=1), memory_clock)
    x, s = on_redis[0], on_redis[1]
    assert on_redis[2] == [("x", x, 0), ("g", s, 0)]
    assert on_memory == on_redis


@pytest.mark.parametrize("operation", ["ack", "dead_letter", "pause", "resume", "unblock"])
def test_a_call_that_settles_or_holds_one_group_moves_at_most_a_thousand_of_its_due_ones(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis, operation: str
) -> None:
    """Only appends need all of a group's due messages in first; the other calls on one group
    move a thousand per script, and the rest join later, still in order."""
    clock = FakeClock()
    transport = transport_factory(clock=clock, max_attempts=1, on_exhausted="block")
    transport.publish("g", Event(kind="a"))
    lease = transport.claim(visibility=1)
    assert lease is not None
    ids = transport.publish_many([("g", Event(kind="k"))] * 1500, delay=5)
    if operation in ("pause", "resume"):
        assert transport.ack(lease)
    if operation == "resume":
        assert transport.pause("g")  # g has no message: it is kept, paused and empty
    if operation == "unblock":
        clock.advance(2)
        assert transport.claim() is None  # a's one delivery is used up: g is blocked
        assert transport.groups(state="blocked")[0].group_id == "g"
    clock.advance(5)
    if operation == "ack":
        assert transport.ack(lease)
    elif operation == "dead_letter":
        assert transport.dead_letter(lease, "r")
    elif operation == "pause":
        assert transport.pause("g")
    elif operation == "resume":
        assert transport.resume("g")
    else:
        assert transport.unblock("g", drop_head=True)
    assert raw_client.zcard(transport.key_prefix + "sched") == 500
    assert raw_client.zcard(transport.key_prefix + "q:g") == 1000
    if operation == "pause":
        assert transport.resume("g")
    assert [mid for _gid, mid in _drain(transport)] == ids


def test_group_moves_a_backlog_of_its_due_messages_a_thousand_per_script(
    redis_url: str, new_queue: Callable[[], str]
) -> None:
    clock = FakeClock()
    client = _CountingRedis.from_url(redis_url)
    assert isinstance(client, _CountingRedis)
    transport = RedisTransport(client=client, queue=new_queue(), clock=clock)
    try:
        first = transport.publish_many([("g", Event(kind="k"))] * 1500, delay=1)[0]
        clock.advance(1)
        for script in load_scripts().values():  # so that no NOSCRIPT reload is counted
            client.script_load(script.text)
        client.shas.clear()
        info = transport.group("g")
        assert info is not None
        assert (info.depth, info.head_message_id) == (1500, first)
        join, look = load_scripts()["join_due"].sha, load_scripts()["group"].sha
        assert client.shas == [look, join, look]
        client.shas.clear()
        assert transport.group("g") == info
        assert client.shas == [look]
    finally:
        transport.close()
        client.close()
