"""Fairness keys in Redis (docs/fairness.md, lua/lib/fairness.lua): what the conformance suite
cannot see from outside. A cap is counted from the key's live leases in Redis, so a crashed
holder's slot comes back when its lease expires, with no sweeper; policies live in Redis, so
every worker obeys the same numbers at its next claim; each claim is one script, so claims of
several workers interleave only between scripts and the cap holds in every order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import redis

from pgque.conformance.clock import FakeClock
from pgque.core import Event, KeyPolicy
from pgque.redis import RedisTransport
from pgque.redis._replies import text


def _live(raw: redis.Redis, transport: RedisTransport, key: str, now: float) -> int:
    """The key's live leases as Redis holds them (P.."kl:"..key, scored by expiry)."""
    return int(raw.zcount(transport.key_prefix + "kl:" + key, f"({now!r}", "+inf"))


def test_an_expired_lease_frees_its_slot_with_no_sweeper(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """Worker A takes the key's one slot and dies (never settles). Nothing runs meanwhile; the
    first claim of worker B after A's lease expired gets the slot: the count is of leases whose
    expiry lies ahead, so an expired one holds nothing."""
    clock = FakeClock()
    crashed = transport_factory(clock=clock)
    other = transport_factory(clock=clock, queue=crashed.queue)
    crashed.set_key_policy("t", max_in_flight=1)
    for n in range(3):
        crashed.publish(f"t-{n}", Event(kind="job"), fairness_key="t")
    dead = crashed.claim(visibility=10)
    assert dead is not None
    assert _live(raw_client, crashed, "t", clock()) == 1
    assert other.claim(visibility=10) is None  # at the cap
    clock.advance(9.9)
    assert other.claim(visibility=10) is None  # still held
    clock.advance(0.2)
    taken = other.claim(visibility=10)
    assert taken is not None
    assert taken.group_id != dead.group_id  # the key's longest-waiting group
    assert _live(raw_client, other, "t", clock()) == 1
    assert other.claim(visibility=10) is None


def test_the_cap_holds_whatever_order_two_workers_claim_and_settle_in(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """Two workers alternate claims, settlements and expiries in every order of a fixed
    schedule; after every step the key's live leases never exceed its cap."""
    clock = FakeClock()
    a = transport_factory(clock=clock)
    b = transport_factory(clock=clock, queue=a.queue)
    a.set_key_policy("t", max_in_flight=2)
    for n in range(12):
        a.publish(f"t-{n}", Event(kind="job"), fairness_key="t")
        a.publish(f"t-{n}", Event(kind="job"), fairness_key="t")
    held: dict[str, list[Any]] = {"a": [], "b": []}
    workers = {"a": a, "b": b}
    schedule = "ab" * 3 + "aab" + "bba" + "ab"
    for step, name in enumerate(schedule):
        worker = workers[name]
        if step % 3 == 2 and held[name]:
            assert worker.ack(held[name].pop(0))
        if step % 5 == 4:
            clock.advance(6)  # every lease out expires: their slots come back
            held = {"a": [], "b": []}
        held[name] += worker.claim_many(3, visibility=5)
        live = _live(raw_client, a, "t", clock())
        assert live <= 2, (step, name, live)
        info = a.key_info("t")
        assert info is not None
        assert info.in_flight == live


def test_a_policy_set_by_one_worker_binds_every_other_at_its_next_claim(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    operator = transport_factory()
    worker = transport_factory(queue=operator.queue)
    for n in range(4):
        worker.publish(f"t-{n}", Event(kind="job"), fairness_key="t")
    operator.set_key_policy("t", max_in_flight=1)
    assert len(worker.claim_many(4)) == 1
    assert worker.key_policy("t") == KeyPolicy(max_in_flight=1)
    operator.set_key_policy(None, weight=2)
    assert worker.key_policy(None) == KeyPolicy(weight=2)
    assert operator.delete_key_policy("t")
    # "t" now follows the default policy: no cap.
    assert len(worker.claim_many(4)) == 3


def test_a_weight_and_a_rate_round_trip_exactly(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    stored = transport.set_key_policy("t", weight=1 / 3, rate=0.1, per=7.25, burst=3)
    assert transport.key_policy("t") == stored
    raw = text(raw_client.hget(transport.key_prefix + "kp", "t"))
    assert raw == f"{1 / 3!r} - 0.1 7.25 3"


def test_keys_page_in_utf8_byte_order_with_the_default_key_first(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    names = ["b", "a", "é", "z", "日本", "A", "ä"]
    for name in names:
        transport.publish(f"g-{name}", Event(kind="job"), fairness_key=name)
    transport.publish("plain", Event(kind="job"))
    listed: list[str] = []
    after: str | None = None
    while page := transport.keys(2, after=after):
        listed += [k.key for k in page]
        after = page[-1].key
    assert listed == ["", *sorted(names, key=lambda n: n.encode("utf-8"))]


def test_a_group_that_drains_and_comes_back_under_another_key_moves_between_keys(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="job"), fairness_key="first")
    lease = transport.claim()
    assert lease is not None
    assert transport.ack(lease)
    assert transport.keys(10) == []  # no group, no policy: not listed
    transport.publish("g", Event(kind="job"), fairness_key="second")
    [key] = transport.keys()
    assert (key.key, key.groups, key.messages) == ("second", 1, 1)


def test_a_scheduled_message_keeps_its_key_until_it_joins(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="later"), delay=5, fairness_key="t")
    clock.advance(5)
    info = transport.group("g")
    assert info is not None
    assert info.fairness_key == "t"
    [key] = transport.keys()
    assert (key.key, key.groups) == ("t", 1)


def test_purge_keeps_policies_and_drops_the_keys_history(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    transport.set_key_policy("kept", weight=2)
    for n in range(3):
        transport.publish(f"x-{n}", Event(kind="job"), fairness_key="x")
    assert len(transport.claim_many(3)) == 3
    transport.purge()
    p = transport.key_prefix
    left = {text(k)[len(p) :] for k in raw_client.scan_iter(match=p + "k*")}
    assert left == {"kp", "kall"}
    assert [(k.key, k.own_policy) for k in transport.keys(10)] == [("kept", True)]


def test_a_queue_without_keys_walks_one_key(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """Groups without a key share the default key "": the claim order of keys holds it alone,
    and the groups go round-robin as before."""
    transport = transport_factory()
    for group in ("c", "a", "b"):
        transport.publish(group, Event(kind="job"))
    p = transport.key_prefix
    assert [text(m) for m in raw_client.zrange(p + "kq", 0, -1)] == [""]
    leases = transport.claim_many(3)
    assert [lease.group_id for lease in leases] == ["a", "b", "c"]  # never served: by id
    for lease in leases:
        transport.publish(lease.group_id, Event(kind="again"))
    for group in ("b", "c", "a"):  # served in this order: round-robin follows it
        assert transport.ack(next(le for le in leases if le.group_id == group))
    assert Counter(le.group_id for le in transport.claim_many(3)) == Counter("abc")
