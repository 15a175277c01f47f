"""Stale entries (a group whose messages vanished outside pgque, e.g. by eviction or a manual
DEL) are cleaned up by claim and never block it."""

from __future__ import annotations

from typing import Any

import redis

from pgque.core import Event
from pgque.redis._replies import text


def test_claim_skips_and_removes_stale_groups(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    transport.publish("real", Event(kind="k"))
    transport.publish("evicted", Event(kind="k"), priority=2)
    raw_client.delete(p + "q:evicted")  # its list vanished; group hash and ready entry remain
    # Ready entries with no group at all, sorting before "real" in every tier.
    for tier in range(5):
        raw_client.zadd(p + f"r{tier}", {f"ghost{i}": 0 for i in range(100)})
    raw_client.zadd(p + "kr:", {f"ghost{i}": 0 for i in range(100)})  # the default key's
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == "real"
    for tier in range(5):
        members = {text(m) for m in raw_client.zrange(p + f"r{tier}", 0, -1)}
        assert members <= {"real"}, f"tier {tier} kept stale entries: {sorted(members)[:3]}"
    assert {text(m) for m in raw_client.zrange(p + "kr:", 0, -1)} == {"real"}
    assert not raw_client.exists(p + "g:evicted")
    assert transport.ack(lease)
    assert transport.stats().groups == 0


def test_only_stale_groups_means_nothing_to_claim(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    raw_client.hset(p + "g:empty", "prio", "0")
    raw_client.zadd(p + "r0", {"empty": 0, "nothing": 0})
    raw_client.zadd(p + "kr:", {"empty": 0, "nothing": 0})
    raw_client.zadd(p + "kq", {"": 0})
    assert transport.claim_many(5) == []
    assert raw_client.zcard(p + "r0") == 0
    assert raw_client.zcard(p + "kr:") == 0
    assert raw_client.zcard(p + "kq") == 0  # a key without ready groups leaves the claim order
    assert not raw_client.exists(p + "g:empty")


def test_entry_in_a_wrong_tier_is_dropped_not_served_twice(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    transport.publish("g", Event(kind="k"), priority=3)
    raw_client.zadd(p + "r0", {"g": 0})  # a stray duplicate in tier 0
    leases = transport.claim_many(5)
    assert [(lease.group_id, lease.priority) for lease in leases] == [("g", 3)]
    assert raw_client.zscore(p + "r3", "g") == leases[0].expires_at
    assert raw_client.zscore(p + "kr:", "g") == leases[0].expires_at


def test_entry_in_another_keys_ready_set_is_dropped_not_served_twice(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    p = transport.key_prefix
    transport.publish("g", Event(kind="k"), fairness_key="a")
    raw_client.zadd(p + "kr:b", {"g": 0})  # a stray entry under key "b"
    raw_client.zadd(p + "kq", {"b": -1})  # which comes first
    leases = transport.claim_many(5)
    assert [lease.group_id for lease in leases] == ["g"]
    assert raw_client.exists(p + "kr:b") == 0
    assert raw_client.zscore(p + "kq", "b") is None
    assert raw_client.zscore(p + "kr:a", "g") == leases[0].expires_at
