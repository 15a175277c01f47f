"""Every key of a queue carries the queue's hash tag, so a queue lives in one Cluster slot."""

from __future__ import annotations

from typing import Any

import redis
from redis.crc import key_slot

from pgque.core import Event
from pgque.redis import key_prefix
from pgque.redis._replies import text


def test_prefix_is_the_hash_tag() -> None:
    assert key_prefix("orders") == "{pgque:orders}:"


def test_all_keys_of_a_queue_share_one_slot(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory(max_attempts=1)
    groups = ["a", "b:c", "{x}", "ünï", "g" * 512]
    for i, group in enumerate(groups):
        transport.publish(group, Event(kind="k"), priority=i % 5)
        transport.publish(group, Event(kind="k"), priority=i % 5)
    lease = transport.claim()
    assert lease is not None
    transport.dead_letter(lease, "to create dead-letter keys", error="with an error")
    for lease in transport.claim_many(10, 0.0, holder="h"):
        transport.nack(lease, error="an error")
    transport.pause("paused")
    transport.claim_many(10)  # exhausted heads are dead-lettered now
    transport.publish("fresh", Event(kind="k"))
    again = transport.claim()
    assert again is not None
    transport.nack(again, error="kept on the message")
    keys = [k.decode() for k in raw_client.scan_iter(match=transport.key_prefix + "*")]
    names = {key.removeprefix(transport.key_prefix) for key in keys}
    assert {"groups", "paused", "err", "layout", "dead"} <= names
    assert len(keys) > 8
    assert all(key.startswith(transport.key_prefix) for key in keys)
    slots = {key_slot(key.encode()) for key in keys}
    assert slots == {key_slot(transport.key_prefix.encode())}


def test_queues_spread_over_slots() -> None:
    slots = {key_slot(key_prefix(f"queue_{i}").encode()) for i in range(50)}
    assert len(slots) > 40


def test_purge_leaves_only_the_id_counters_and_the_meta_key(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory(max_attempts=1, on_exhausted="block")
    for group in ("a", "b", "c"):
        transport.publish(group, Event(kind="k"), priority=2)
        transport.publish(group, Event(kind="k"), priority=2)
    lease = transport.claim()
    assert lease is not None
    transport.dead_letter(lease, "dead")
    transport.claim_many(3, 0.0)
    transport.claim_many(3)  # blocks the exhausted groups
    assert transport.stats().blocked >= 1
    transport.purge()
    keys = {text(k) for k in raw_client.scan_iter(match=transport.key_prefix + "*")}
    # The meta key says the queue exists on this node (a node without it is refused).
    assert keys == {transport.key_prefix + k for k in ("seq", "dseq", "meta")}
    assert transport.stats().groups == 0
    assert transport.publish("a", Event(kind="k")) == 7  # ids keep growing
