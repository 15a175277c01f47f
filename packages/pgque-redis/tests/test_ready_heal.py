"""A ready-set entry deleted from outside pgque (eviction, a manual ``ZREM`` or ``DEL``) is put
back by the next publish into its group, with the score it had: a stranded group flows again,
while a leased, parked or blocked group stays so and a healthy group keeps its place in the
round-robin."""

from __future__ import annotations

from typing import Any

import redis

from pgque.conformance.clock import FakeClock
from pgque.core import Event


def _score(raw: redis.Redis, transport: Any, tier: int, group: str) -> float | None:
    value = raw.zscore(transport.key_prefix + f"r{tier}", group)
    return None if value is None else float(value)


def test_a_publish_heals_a_group_whose_ready_entry_vanished(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="first"), priority=2)
    raw_client.zrem(transport.key_prefix + "r2", "g")  # evicted / deleted by hand
    raw_client.zrem(transport.key_prefix + "kr:", "g")  # and its key's copy
    assert transport.claim() is None  # stranded: nothing lists the group
    transport.publish("g", Event(kind="second"), priority=0)
    lease = transport.claim(min_priority=2)  # healed into its own tier, not the publish's
    assert lease is not None
    assert (lease.group_id, lease.event.kind, lease.priority) == ("g", "first", 2)
    assert transport.ack(lease)
    lease = transport.claim()
    assert lease is not None
    assert lease.event.kind == "second"


def test_healing_a_whole_deleted_ready_set_keeps_the_round_robin(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    for group in ("a", "b", "c"):
        transport.publish(group, Event(kind="x"))
        transport.publish(group, Event(kind="y"))
    served = transport.claim()  # "a", the smallest id among never-served groups
    assert served is not None
    assert served.group_id == "a"
    clock.advance(1)
    assert transport.ack(served)  # "a" goes behind "b" and "c"
    before = {g: _score(raw_client, transport, 0, g) for g in ("a", "b", "c")}
    raw_client.delete(transport.key_prefix + "r0")  # the whole tier's ready set is gone
    raw_client.delete(transport.key_prefix + "kr:")  # and the default key's
    for group in ("c", "a", "b"):
        transport.publish(group, Event(kind="z"))
    assert {g: _score(raw_client, transport, 0, g) for g in ("a", "b", "c")} == before
    order = [lease.group_id for lease in transport.claim_many(3)]
    assert order == ["b", "c", "a"]


def test_healing_never_frees_a_leased_group(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="x"))
    lease = transport.claim(visibility=30)
    assert lease is not None
    raw_client.zrem(transport.key_prefix + "r0", "g")
    transport.publish("g", Event(kind="y"))
    assert transport.claim() is None  # still leased
    assert _score(raw_client, transport, 0, "g") == lease.expires_at
    extended = transport.extend(lease, 60)
    assert extended is not None
    raw_client.zrem(transport.key_prefix + "r0", "g")
    transport.publish("g", Event(kind="z"))
    assert _score(raw_client, transport, 0, "g") == extended.expires_at
    clock.advance(61)  # the renewed lease has expired: the group is claimable again
    again = transport.claim()
    assert again is not None
    assert again.message_id == lease.message_id
    assert again.attempt == 2


def test_healing_never_unparks_a_group(transport_factory: Any, raw_client: redis.Redis) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="x"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease, delay=100)
    until = _score(raw_client, transport, 0, "g")
    raw_client.zrem(transport.key_prefix + "r0", "g")
    transport.publish("g", Event(kind="y"))
    assert _score(raw_client, transport, 0, "g") == until
    assert transport.claim() is None
    assert transport.stats().parked == 1
    clock.advance(101)
    again = transport.claim()
    assert again is not None
    assert again.message_id == lease.message_id


def test_healing_never_unblocks_a_group(transport_factory: Any, raw_client: redis.Redis) -> None:
    transport = transport_factory(max_attempts=1, on_exhausted="block")
    transport.publish("g", Event(kind="x"))
    lease = transport.claim(visibility=30)
    assert lease is not None
    assert transport.nack(lease)
    assert transport.claim() is None  # exhausted: the group is now blocked
    assert transport.stats().blocked == 1
    transport.publish("g", Event(kind="y"))
    assert _score(raw_client, transport, 0, "g") is None
    assert transport.claim() is None
    assert transport.unblock("g")
    again = transport.claim()
    assert again is not None
    assert again.message_id == lease.message_id


def test_a_publish_into_a_healthy_group_keeps_its_score(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="x"))
    transport.publish("g", Event(kind="y"))
    lease = transport.claim()
    assert lease is not None
    clock.advance(5)
    assert transport.ack(lease)
    score = _score(raw_client, transport, 0, "g")
    clock.advance(5)
    transport.publish("g", Event(kind="z"))
    assert _score(raw_client, transport, 0, "g") == score


def test_a_publish_after_the_group_hash_vanished_never_frees_a_leased_group(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    """The group's hash is evicted while its list and its ready entry (scored by a live lease)
    remain: the next publish recreates the hash but must not overwrite the lease's score, or
    a second claim would lease the same message while the first holder runs."""
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="x"), priority=2)
    lease = transport.claim(visibility=30)
    assert lease is not None
    raw_client.delete(transport.key_prefix + "g:g")  # evicted
    transport.publish("g", Event(kind="y"), priority=0)
    assert _score(raw_client, transport, 2, "g") == lease.expires_at
    assert _score(raw_client, transport, 0, "g") is None  # its own tier, not the publish's
    assert transport.claim() is None  # the lease's time is not over
    clock.advance(31)
    again = transport.claim(min_priority=2)
    assert again is not None
    assert (again.message_id, again.priority) == (lease.message_id, 2)


def test_a_publish_after_the_group_hash_vanished_never_unblocks_a_group(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory(max_attempts=1, on_exhausted="block")
    transport.publish("g", Event(kind="x"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease)
    assert transport.claim() is None  # exhausted: blocked
    raw_client.delete(transport.key_prefix + "g:g")  # evicted
    transport.publish("g", Event(kind="y"))
    assert transport.claim() is None
    assert transport.stats().blocked == 1
    assert transport.unblock("g")
    again = transport.claim()
    assert again is not None
    assert again.message_id == lease.message_id
