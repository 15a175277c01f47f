"""Key layout 2 (issue 14) and 4 (the fairness keys' indexes): a group's messages are a sorted
set by message id, paused and blocked groups have lexicographic indexes of their own and leave
the ready sets, every group is in the ``groups`` index, a queue of layout 2 or 3 is indexed for
layout 4 once, a queue of layout 4 is indexed for layout 5 (the indexes stats counts leased and
parked groups in) once, and a queue whose messages another layout wrote is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from pgque.conformance.clock import FakeClock
from pgque.core import Event, SchemaMismatch
from pgque.redis import RedisTransport
from pgque.redis._replies import text


def _members(raw: redis.Redis, key: str) -> list[str]:
    return [text(m) for m in raw.zrange(key, 0, -1)]


def test_a_groups_messages_are_a_sorted_set_scored_by_id(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    ids = [transport.publish("g", Event(kind=str(i))) for i in range(3)]
    assert raw_client.type(p + "q:g") == b"zset"
    assert raw_client.zrange(p + "q:g", 0, -1, withscores=True) == [
        (str(i).encode(), float(i)) for i in ids
    ]
    assert _members(raw_client, p + "groups") == ["g"]
    assert text(raw_client.get(p + "layout")) == "5"


def test_a_paused_group_leaves_its_ready_set_and_comes_back_at_its_score(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    p = transport.key_prefix
    transport.publish("g", Event(kind="k"), priority=3)
    transport.publish("g", Event(kind="k"), priority=3)
    lease = transport.claim(visibility=30)
    assert lease is not None
    assert transport.pause("g")
    assert raw_client.zscore(p + "r3", "g") is None
    assert _members(raw_client, p + "paused") == ["g"]
    assert transport.extend(lease, 60) is not None  # a lease out still works, stays unlisted
    assert raw_client.zscore(p + "r3", "g") is None
    assert transport.resume("g")
    assert raw_client.zscore(p + "r3", "g") == lease.expires_at + 30  # the extended lease
    assert raw_client.exists(p + "paused") == 0
    assert transport.claim() is None  # still leased until its (extended) end
    clock.advance(61)
    again = transport.claim()
    assert again is not None
    assert (again.message_id, again.attempt) == (lease.message_id, 2)


def test_a_paused_blocked_group_is_listed_once_and_blocked_again_on_resume(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory(max_attempts=1, on_exhausted="block")
    p = transport.key_prefix
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease)
    assert transport.claim() is None  # exhausted: blocked
    assert _members(raw_client, p + "blocked") == ["g"]
    assert transport.pause("g")
    assert raw_client.exists(p + "blocked") == 0
    assert _members(raw_client, p + "paused") == ["g"]
    stats = transport.stats()
    assert (stats.paused, stats.blocked, stats.groups) == (1, 0, 1)
    assert transport.resume("g")
    assert _members(raw_client, p + "blocked") == ["g"]
    assert all(raw_client.zscore(p + f"r{t}", "g") is None for t in range(5))
    stats = transport.stats()
    assert (stats.paused, stats.blocked) == (0, 1)


def test_a_drained_paused_group_keeps_only_its_hash_and_index_entries(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.pause("g")
    assert transport.ack(lease)
    keys = {text(k) for k in raw_client.scan_iter(match=p + "*")}
    # The default key's: its groups, its listing and its finish tag.
    fair = ("kg:", "kall", "kf")
    assert keys == {
        p + k for k in ("seq", "layout", "heads:ok", "meta", "g:g", "groups", "paused", *fair)
    }
    assert transport.resume("g")  # a resumed group without messages is removed
    keys = {text(k) for k in raw_client.scan_iter(match=p + "*")}
    assert keys == {p + k for k in ("seq", "layout", "heads:ok", "meta", "kf")}


def test_a_lease_is_remembered_by_its_message_id(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    transport.publish("g", Event(kind="k"))
    lease = transport.claim(holder="host:1:0")
    assert lease is not None
    fields = {text(k): text(v) for k, v in raw_client.hgetall(p + "g:g").items()}
    assert fields["mid"] == str(lease.message_id)
    assert fields["holder"] == "host:1:0"
    assert transport.release(lease)
    fields = {text(k): text(v) for k, v in raw_client.hgetall(p + "g:g").items()}
    assert not {"token", "mid", "holder"} & fields.keys()
    assert raw_client.hexists(p + "att", str(lease.message_id)) == 0  # back to 0 attempts


def test_a_claim_without_holder_clears_the_previous_one(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="k"))
    assert transport.claim(visibility=1, holder="first") is not None
    clock.advance(2)  # expired, not settled: the next claim takes the group over
    assert transport.claim() is not None
    assert not raw_client.hexists(transport.key_prefix + "g:g", "holder")
    info = transport.group("g")
    assert info is not None
    assert info.lease_holder is None


def _write_layout_1_queue(raw: redis.Redis, prefix: str) -> None:
    """What pgque before key layout 2 left for one message of group g (no layout key)."""
    raw.set(prefix + "seq", 1)
    raw.rpush(prefix + "q:g", "1")
    raw.hset(prefix + "g:g", mapping={"prio": "0", "at": "0"})
    raw.zadd(prefix + "r0", {"g": 0})
    raw.hset(prefix + "msg", "1", Event(kind="old").to_json())
    raw.zadd(prefix + "enq", {"1": 1_700_000_000.0})


def _snapshot(raw: redis.Redis, prefix: str) -> dict[str, Any]:
    return {text(k): raw.dump(k) for k in raw.scan_iter(match=prefix + "*")}


@pytest.mark.parametrize(
    "operation",
    [
        lambda t: t.publish("g", Event(kind="new")),
        lambda t: t.publish("other", Event(kind="new")),
        lambda t: t.claim(),
        lambda t: t.stats(),
        lambda t: t.group("g"),
        lambda t: t.groups(),
        lambda t: t.pause("g"),
        lambda t: t.redrive(),
        lambda t: t.dead_letters(),
    ],
    ids=[
        "publish",
        "publish-other",
        "claim",
        "stats",
        "group",
        "groups",
        "pause",
        "redrive",
        "dead_letters",
    ],
)
def test_a_queue_written_in_layout_1_is_refused_untouched(
    transport_factory: Callable[..., RedisTransport],
    raw_client: redis.Redis,
    operation: Callable[[RedisTransport], object],
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    _write_layout_1_queue(raw_client, p)
    before = _snapshot(raw_client, p)
    with pytest.raises(SchemaMismatch, match="key layout 1") as info:
        operation(transport)
    assert "purge" in str(info.value)
    assert _snapshot(raw_client, p) == before


def test_purge_empties_a_layout_1_queue_for_this_pgque(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    _write_layout_1_queue(raw_client, p)
    raw_client.sadd(p + "blocked", "b")  # layout 1 kept blocked groups in a set
    raw_client.rpush(p + "q:b", "1")
    raw_client.hset(p + "g:b", mapping={"prio": "0", "blocked": "1"})
    transport.purge()
    assert {text(k) for k in raw_client.scan_iter(match=p + "*")} == {p + "seq"}
    assert transport.publish("g", Event(kind="new")) == 2
    lease = transport.claim()
    assert lease is not None
    assert lease.event.kind == "new"


def test_a_layout_1_queue_with_only_dead_letters_is_served(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """Dead letters kept their fields (layout 2 only adds ``e``): a queue holding no message is
    no layout-1 queue, and its old dead letters redrive in place."""
    transport = transport_factory()
    p = transport.key_prefix
    raw_client.set(p + "seq", 5)
    raw_client.hset(
        p + "d:1",
        mapping={
            "g": "g",
            "m": "3",
            "b": Event(kind="old").to_json(),
            "p": "2",
            "a": "4",
            "r": "max_attempts exhausted",
            "t": "1700000000",
        },
    )
    raw_client.zadd(p + "dead", {"1": 1})
    (letter,) = transport.dead_letters()
    assert (letter.message_id, letter.error, letter.attempts) == (3, None, 4)
    assert transport.redrive() == 1
    lease = transport.claim()
    assert lease is not None
    assert (lease.message_id, lease.priority, lease.attempt) == (3, 2, 1)


def test_every_write_marks_layout_5(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """Layout 4 adds the fairness keys' indexes, which a pgque of layout 2 or 3 would not keep,
    and 5 the indexes stats counts leased and parked groups in, which a pgque of layout 4 would
    not keep: every queue this pgque writes is marked 5, which such a pgque refuses."""
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    p = transport.key_prefix
    transport.publish("g", Event(kind="plain"))
    assert text(raw_client.get(p + "layout")) == "5"
    transport.publish("g", Event(kind="later"), delay=5)
    assert text(raw_client.get(p + "layout")) == "5"
    ticking = transport_factory(clock=clock)
    assert ticking.publish_tick("e", 1.0, "g", Event(kind="tick")) is not None
    assert text(raw_client.get(ticking.key_prefix + "layout")) == "5"
    transport.purge()
    assert raw_client.get(p + "layout") is None
    transport.publish("g", Event(kind="plain"), fairness_key="tenant")
    assert text(raw_client.get(p + "layout")) == "5"


def _drop_fairness_keys(raw: redis.Redis, prefix: str) -> None:
    """Leave what a pgque of layout 2 or 3 wrote: no fairness key's index."""
    for key in raw.scan_iter(match=prefix + "k*"):
        raw.delete(key)


@pytest.mark.parametrize("layout", ["2", "3"])
def test_a_queue_of_layout_2_or_3_is_indexed_once_and_served(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis, layout: str
) -> None:
    """Its groups go under the default key on this pgque's first call, a lease out keeps its
    slot, and the queue is layout 5 from then on."""
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    p = transport.key_prefix
    for group in ("a", "a", "b", "c"):
        transport.publish(group, Event(kind=group))
    lease = transport.claim(visibility=30)
    assert lease is not None
    assert lease.group_id == "a"
    _drop_fairness_keys(raw_client, p)
    raw_client.set(p + "layout", layout)
    info = transport.group("b")  # a read indexes the queue first
    assert info is not None
    assert info.fairness_key is None
    assert text(raw_client.get(p + "layout")) == "5"
    [key] = transport.keys()
    assert (key.key, key.in_flight, key.groups, key.messages) == ("", 1, 3, 4)
    assert [le.group_id for le in transport.claim_many(5)] == ["b", "c"]
    assert transport.ack(lease)
    clock.advance(1)
    again = transport.claim()
    assert again is not None
    assert again.group_id == "a"


def test_a_queue_of_layout_4_is_indexed_once_for_stats(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """A pgque of layout 4 kept no rl or rp index: the first call of this one puts its leased
    groups in rl and its parked ones in rp, so stats counts them, and marks the queue 5."""
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    p = transport.key_prefix
    for group in ("a", "b", "c", "d"):
        transport.publish(group, Event(kind=group))
    leases = {lease.group_id: lease for lease in transport.claim_many(3, visibility=30)}
    assert set(leases) == {"a", "b", "c"}
    assert transport.nack(leases["b"], delay=10)
    clock.advance(1)
    raw_client.delete(p + "rl", p + "rp")
    raw_client.set(p + "layout", "4")
    stats = transport.stats()
    assert (stats.groups, stats.in_flight, stats.parked) == (4, 2, 1)
    assert stats.next_resume_at == clock() - 1 + 10
    assert text(raw_client.get(p + "layout")) == "5"
    assert transport.ack(leases["a"])
    assert transport.stats().in_flight == 1


def test_this_pgque_refuses_a_later_layout_untouched(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    mid = transport.publish("g", Event(kind="k"))
    info = transport.group("g")
    assert info is not None
    assert info.head_message_id == mid
    raw_client.set(p + "layout", "6")
    before = _snapshot(raw_client, p)
    with pytest.raises(
        SchemaMismatch, match="key layout 6, and this pgque reads layouts 2, 3, 4 and 5"
    ):
        transport.publish("g", Event(kind="k"))
    assert _snapshot(raw_client, p) == before
