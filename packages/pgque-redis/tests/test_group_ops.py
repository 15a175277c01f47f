"""Issue 14 on Redis: holder, errors, release, pause/resume, group info, dead-letter paging and
deletion, and in-place redrive by the order rule (a group's messages in id order; a claim
delivers the lowest id; a lease is fenced by its token and its message id)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from pgque.conformance.clock import FakeClock
from pgque.core import ErrorInfo, Event, InvalidInput
from pgque.core.models import ERROR_TRACEBACK_CHARS
from pgque.redis import RedisTransport


def _server_now(raw: redis.Redis) -> float:
    seconds, micros = raw.time()
    return float(seconds) + micros / 1e6


def _raise(message: str) -> ValueError:
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


def test_an_error_is_timed_by_the_server_clock(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    before = _server_now(raw_client)
    assert transport.nack(lease, error=_raise("bad sku"))
    after = _server_now(raw_client)
    info = transport.group("g")
    assert info is not None
    assert info.last_error is not None
    assert (info.last_error.type, info.last_error.message) == ("ValueError", "bad sku")
    assert info.last_error.traceback is not None
    assert "raise ValueError(message)" in info.last_error.traceback
    assert before <= info.last_error.at <= after


def test_an_error_record_given_whole_keeps_its_time_and_is_bounded(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    record = ErrorInfo(type="x.Boom", message="m", traceback="t" * 50_000, at=12.25)
    assert transport.dead_letter(lease, "r", error=record)
    (letter,) = transport.dead_letters()
    assert letter.error is not None
    assert (letter.error.type, letter.error.at) == ("x.Boom", 12.25)
    assert letter.error.traceback is not None
    assert len(letter.error.traceback) == ERROR_TRACEBACK_CHARS  # cut, never refused


def test_a_string_error_and_exhaustion_keep_the_last_error(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock, max_attempts=2)
    transport.publish("g", Event(kind="k"))
    for message in ("first", None):
        lease = transport.claim()
        assert lease is not None
        clock.advance(1)
        assert transport.nack(lease, error=message)  # None keeps the stored one
    assert transport.claim() is None  # exhausted at the claim
    (letter,) = transport.dead_letters()
    assert letter.reason == "max_attempts (2) exhausted"
    assert letter.error is not None
    assert (letter.error.type, letter.error.message, letter.error.at) == (
        "error",
        "first",
        1_800_000_001.0,
    )


def test_a_blocked_group_shows_its_heads_last_error(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory(clock=FakeClock(), max_attempts=1, on_exhausted="block")
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease, error="boom")
    assert transport.claim() is None
    info = transport.group("g")
    assert info is not None
    assert info.last_error is not None
    assert (info.state, info.head_attempts, info.last_error.message) == ("blocked", 1, "boom")
    assert transport.unblock("g")  # retried afresh: attempts 0, the error stays
    info = transport.group("g")
    assert info is not None
    assert info.last_error is not None
    assert (info.state, info.head_attempts, info.last_error.message) == ("ready", 0, "boom")


def test_release_never_spends_an_attempt(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory(clock=FakeClock(), max_attempts=1)
    transport.publish("g", Event(kind="k"))
    for _ in range(5):
        lease = transport.claim()
        assert lease is not None
        assert lease.attempt == 1
        assert transport.release(lease)
        assert transport.release(lease) is False  # fenced like ack
    assert transport.dead_letters() == []


def test_redrive_in_place_goes_ahead_of_later_messages_while_a_lease_finishes(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory(clock=FakeClock())
    first = transport.publish("g", Event(kind="created"))
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "failed", error="boom")
    second = transport.publish("g", Event(kind="paid"))
    third = transport.publish("g", Event(kind="shipped"))
    in_flight = transport.claim(visibility=30)
    assert in_flight is not None
    assert in_flight.message_id == second
    assert transport.redrive() == 1  # "created" returns ahead of "shipped"
    info = transport.group("g")
    assert info is not None
    assert (info.head_message_id, info.depth, info.head_attempts) == (first, 3, 0)
    assert info.last_error is not None
    assert info.last_error.message == "boom"  # the dead letter's error: the history kept
    # The lease out is fenced by its own message id: it still extends and acks.
    assert transport.extend(in_flight, 30) is not None
    assert transport.ack(in_flight)
    order = []
    while (lease := transport.claim()) is not None:
        order.append((lease.message_id, lease.attempt))
        assert transport.ack(lease)
    assert order == [(first, 1), (third, 1)]


@pytest.mark.parametrize("publish_first", [True, False])
def test_redrive_and_a_publish_give_one_order_whichever_runs_first(
    transport_factory: Callable[..., RedisTransport], publish_first: bool
) -> None:
    """Two scripts never interleave; either order of a redrive and a publish into the same
    group leaves the same order, since the group is ordered by message id."""
    transport = transport_factory(clock=FakeClock())
    first = transport.publish("g", Event(kind="a"))
    second = transport.publish("g", Event(kind="b"))
    for _ in range(2):
        lease = transport.claim()
        assert lease is not None
        assert transport.dead_letter(lease, "r")
    if publish_first:
        third = transport.publish("g", Event(kind="c"))
        assert transport.redrive() == 2
    else:
        assert transport.redrive([2, 1]) == 2
        third = transport.publish("g", Event(kind="c"))
    order = []
    while (lease := transport.claim()) is not None:
        order.append(lease.message_id)
        assert transport.ack(lease)
    assert order == [first, second, third]


def test_redrive_in_place_keeps_an_existing_groups_priority_and_hold(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("g", Event(kind="k"), priority=4)
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "r")
    assert transport.pause("g")  # the group is gone: created paused, priority 0
    assert transport.redrive() == 1
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.priority, info.depth) == ("paused", 0, 1)
    assert transport.claim() is None
    assert transport.resume("g")
    again = transport.claim()
    assert again is not None
    assert (again.message_id, again.priority) == (lease.message_id, 0)


def test_redrive_in_place_of_a_missing_group_takes_the_dead_letters_priority(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("g", Event(kind="k"), priority=3)
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "r")
    assert transport.group("g") is None
    assert transport.redrive() == 1
    again = transport.claim(min_priority=3)
    assert again is not None
    assert (again.message_id, again.priority) == (lease.message_id, 3)


def test_redrive_at_the_tail_takes_a_new_id(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory(clock=FakeClock())
    first = transport.publish("g", Event(kind="a"))
    lease = transport.claim()
    assert lease is not None
    assert transport.dead_letter(lease, "r", error="boom")
    second = transport.publish("g", Event(kind="b"))
    assert transport.redrive(in_place=False) == 1
    info = transport.group("g")
    assert info is not None
    assert (info.head_message_id, info.depth) == (second, 2)
    with pytest.raises(InvalidInput):
        transport.redrive(in_place="yes")  # type: ignore[arg-type]
    assert first < second


def test_an_undecodable_dead_letter_redrives_to_the_tail(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """A dead letter whose stored id is no message id (a hand-written group element) cannot
    go back under it: it goes to the tail under a new id."""
    transport = transport_factory()
    p = transport.key_prefix
    raw_client.zadd(p + "q:bad", {"garbage": 0})
    raw_client.hset(p + "g:bad", mapping={"prio": "0", "at": "0"})
    raw_client.zadd(p + "r0", {"bad": 0})
    raw_client.zadd(p + "kr:", {"bad": 0})  # the default key's ready set
    raw_client.zadd(p + "kq", {"": 0}, nx=True)
    assert transport.claim() is None
    (letter,) = transport.dead_letters()
    assert letter.message_id == 0
    assert transport.redrive() == 1
    info = transport.group("bad")
    assert info is not None
    assert info.depth == 1
    assert info.head_message_id is not None
    assert info.head_message_id > 0


def test_pause_holds_an_exhausted_head_and_lets_a_lease_finish(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock, max_attempts=1)
    for kind in ("a", "b", "c", "d", "e"):
        transport.publish("g", Event(kind=kind))
    lease = transport.claim(visibility=10)
    assert lease is not None
    assert transport.pause("g")
    assert transport.extend(lease, 10) is not None
    assert transport.nack(lease)  # the nack of a lease out works while paused
    clock.advance(100)
    assert transport.claim_many(5) == []  # paused: the exhausted head is not dead-lettered
    assert transport.dead_letters() == []
    assert transport.resume("g")
    assert transport.claim() is not None  # "b": "a" was exhausted and dead-lettered now
    assert [d.event.kind for d in transport.dead_letters()] == ["a"]


@pytest.mark.parametrize("settle", ["ack", "release", "dead_letter"])
def test_every_settle_of_a_lease_out_works_while_paused(
    transport_factory: Callable[..., RedisTransport], settle: str
) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("g", Event(kind="a"))
    transport.publish("g", Event(kind="b"))
    lease = transport.claim()
    assert lease is not None
    assert transport.pause("g")
    if settle == "ack":
        assert transport.ack(lease)
    elif settle == "release":
        assert transport.release(lease)
    else:
        assert transport.dead_letter(lease, "r")
    assert transport.claim() is None
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.lease_expires_at, info.lease_holder) == ("paused", None, None)


def test_a_publish_into_an_empty_paused_group_sets_its_priority(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    assert transport.pause("tenant")
    assert transport.pause("tenant") is False
    transport.publish("tenant", Event(kind="k"), priority=2)
    transport.publish("tenant", Event(kind="k"), priority=4)  # the group has messages now
    info = transport.group("tenant")
    assert info is not None
    assert (info.state, info.priority, info.depth) == ("paused", 2, 2)
    assert transport.resume("tenant")
    assert transport.resume("tenant") is False
    lease = transport.claim(min_priority=2)
    assert lease is not None
    assert lease.priority == 2


def test_group_info_shows_an_expired_lease_and_a_paused_park(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="k"))
    lease = transport.claim(visibility=5, holder="host:7:1")
    assert lease is not None
    clock.advance(10)
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.lease_expires_at, info.lease_holder) == (
        "ready",
        lease.expires_at,
        "host:7:1",
    )
    assert transport.nack(lease, delay=50)  # not claimed again: still held
    assert transport.pause("g")
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.resume_at, info.lease_expires_at) == (
        "paused",
        clock() + 50,
        None,
    )
    stats = transport.stats()
    assert (stats.paused, stats.parked, stats.next_resume_at) == (1, 0, None)


def test_the_stats_count_each_group_once(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock, max_attempts=1, on_exhausted="block")
    for group in ("leased", "parked", "blocked", "paused", "ready"):
        transport.publish(group, Event(kind="k"))
    leases = {lease.group_id: lease for lease in transport.claim_many(5, visibility=100)}
    assert transport.nack(leases["parked"], delay=50)
    assert transport.nack(leases["blocked"])
    assert transport.claim_many(5) == []  # blocks the exhausted head
    assert transport.release(leases["ready"])
    assert transport.pause("paused")  # its lease is still out
    assert transport.pause("empty")
    stats = transport.stats()
    assert (stats.groups, stats.paused, stats.blocked, stats.in_flight, stats.parked) == (
        6,
        2,
        1,
        1,
        1,
    )
    assert stats.next_resume_at == clock() + 50
    states = {info.group_id: info.state for info in transport.groups()}
    assert states == {
        "blocked": "blocked",
        "empty": "paused",
        "leased": "leased",
        "parked": "parked",
        "paused": "paused",
        "ready": "ready",
    }


def test_dead_letters_page_by_id(transport_factory: Callable[..., RedisTransport]) -> None:
    transport = transport_factory()
    for i in range(5):
        transport.publish(f"g{i}", Event(kind="k"))
    for lease in transport.claim_many(5):
        assert transport.dead_letter(lease, "r")
    ids = [d.id for d in transport.dead_letters()]
    assert [d.id for d in transport.dead_letters(2, after=ids[1])] == ids[2:4]
    assert transport.dead_letters(after=10**400) == []
    assert [d.id for d in transport.dead_letters(after=-(10**400))] == ids
    assert transport.delete_dead_letters([ids[0], ids[0], ids[3], 10**6]) == 2
    assert transport.delete_dead_letters([]) == 0
    assert [d.id for d in transport.dead_letters()] == [ids[1], ids[2], ids[4]]
    assert transport.stats().dead_letters == 3


def test_queues_lists_a_queue_holding_only_a_paused_group(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    assert transport.queue not in transport.queues()
    assert transport.pause("tenant")
    assert transport.queue in transport.queues()
    assert transport.resume("tenant")
    assert transport.queue not in transport.queues()


def test_a_paused_groups_vanished_hash_comes_back_paused(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    assert transport.pause("g")
    raw_client.delete(transport.key_prefix + "g:g")  # evicted
    transport.publish("g", Event(kind="k"))
    assert transport.claim() is None
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.depth) == ("paused", 2)
