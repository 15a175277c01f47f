"""Routing: partition_key=None, slots identical on every backend, a different N refused."""

from __future__ import annotations

import pytest
from _partition_support import Make

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import Lease
from pgque.partition import (
    KEY_HEADER,
    Exclusive,
    KeyedPublisher,
    Ordered,
    PartitionConsumer,
    SlotCountMismatch,
    group_for,
    policy_options,
    slot_for,
)
from pgque.partition._tiers import check_dedup, check_key

KEYS = ["tenant:1", "tenant:2", "", "é", "日本語", "🙂" * 30, "migrate:tenant:42:v3"] + [
    f"t{i}" for i in range(40)
]


def _drain(transport: object) -> list[Lease]:
    leases = []
    while (lease := transport.claim(30.0)) is not None:  # type: ignore[attr-defined]
        leases.append(lease)
        transport.ack(lease)  # type: ignore[attr-defined]
    return leases


def test_slot_routing_is_the_same_on_every_backend(transport_factory: Make) -> None:
    transport = transport_factory()
    publisher = KeyedPublisher(transport, tier=Ordered(slots=16))
    for key in KEYS:
        publisher.send("FileCreated", {"k": key}, partition_key=key)
    leases = _drain(transport)
    assert len(leases) == len(KEYS)
    for lease in leases:
        key = lease.event.headers[KEY_HEADER]
        assert lease.group_id == f"s16:{slot_for(key, 16)}"


def test_partition_key_none(transport_factory: Make) -> None:
    transport = transport_factory()
    slots = KeyedPublisher(transport, tier=Ordered(slots=4))
    slots.send("x", partition_key=None)
    per_key = KeyedPublisher(transport_factory(), tier=Ordered())
    per_key.send("x", partition_key=None)
    exclusive = KeyedPublisher(transport_factory(), tier=Exclusive())
    exclusive.send("x", partition_key=None)
    (lease,) = _drain(transport)
    assert lease.group_id == "s4:0"
    assert KEY_HEADER not in lease.event.headers
    assert per_key.group_for(None) == "n:" != per_key.group_for("")
    seen: list[object] = []
    consumer = PartitionConsumer(
        exclusive._transport,
        lambda event, ctx: seen.append(ctx.key),
        tier=Exclusive(),
    )
    consumer.run(stop_when_idle=True)
    assert seen == [None]
    assert consumer.counts.ran == 1


def test_a_different_slot_count_is_refused(transport_factory: Make) -> None:
    transport = transport_factory()
    KeyedPublisher(transport, tier=Ordered(slots=16)).send("x", partition_key="a")
    other = transport_factory(queue=transport.queue)
    with pytest.raises(SlotCountMismatch, match="16 slots, not 8"):
        KeyedPublisher(other, tier=Ordered(slots=8)).send("x", partition_key="a")
    consumer = PartitionConsumer(other, lambda e: None, tier=Ordered(slots=32))
    with pytest.raises(SlotCountMismatch):
        consumer.run(stop_when_idle=True)
    # The same N is fine from another transport; draining then resetting allows a new N.
    PartitionConsumer(other, lambda e: None, tier=Ordered(slots=16)).run(stop_when_idle=True)
    backend = KeyedPublisher(other, tier=Ordered(slots=16)).backend
    assert backend.reset_slots() is True
    KeyedPublisher(other, tier=Ordered(slots=8)).send("x", partition_key="a")
    assert backend.reset_slots() is False  # not drained


def test_input_is_checked_before_any_io() -> None:
    with pytest.raises(InvalidInput):
        Ordered(slots=0)
    with pytest.raises(InvalidInput):
        Ordered(slots=257)
    with pytest.raises(InvalidInput):
        Exclusive(contention="wait")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        check_key(42)
    with pytest.raises(InvalidInput):
        check_key("a\x00b")
    with pytest.raises(InvalidInput):
        check_key("x" * 481)
    with pytest.raises(InvalidInput):
        check_dedup("", 5)
    with pytest.raises(InvalidInput):
        check_dedup("k", 0)
    with pytest.raises(InvalidInput):
        check_dedup(None, 5)
    assert check_dedup("k", None) == ("k", 300.0)
    assert group_for(Exclusive(), "k", "e1") == "a:e1"
    assert group_for(Ordered(), "k", "e1") == "k:k"
    with pytest.raises(InvalidInput):
        policy_options("retry")  # type: ignore[arg-type]


def test_policies_must_match_the_transport(transport_factory: Make) -> None:
    blocking = transport_factory(**policy_options("pause", 3))
    with pytest.raises(ConfigurationError, match="on_exhausted='block'"):
        PartitionConsumer(blocking, lambda e: None, policy="skip")
    with pytest.raises(ConfigurationError, match="keeps no order"):
        PartitionConsumer(blocking, lambda e: None, tier=Exclusive(), policy="pause")
    plain = transport_factory()
    with pytest.raises(ConfigurationError, match="policy='pause' needs"):
        PartitionConsumer(plain, lambda e: None, policy="pause")
    PartitionConsumer(blocking, lambda e: None, policy="pause")
