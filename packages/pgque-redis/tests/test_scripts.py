"""Scripts: reloaded after SCRIPT FLUSH (as after a restart), and timed by the server's clock."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from pgque.core import Event
from pgque.redis import AsyncRedisTransport
from pgque.redis._scripts import OPERATIONS, load_scripts


def test_every_operation_has_a_script() -> None:
    scripts = load_scripts()
    assert set(scripts) == set(OPERATIONS)
    assert len({s.sha for s in scripts.values()}) == len(OPERATIONS)


def test_operations_continue_after_script_flush(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    for n in range(6):
        transport.publish(f"g{n % 2}", Event(kind="k", data=n))
    first = transport.claim(60)
    assert first is not None
    raw_client.script_flush()
    assert transport.ack(first)  # EVALSHA hits NOSCRIPT, the script is loaded, ack runs once
    assert transport.stats().messages == 5
    raw_client.script_flush()
    seen = []
    while (lease := transport.claim(60)) is not None:
        raw_client.script_flush()
        assert transport.ack(lease)
        seen.append(lease.event.data)
    assert sorted(seen) == [1, 2, 3, 4, 5]
    assert transport.stats().messages == 0


@pytest.mark.asyncio
async def test_async_operations_continue_after_script_flush(
    redis_url: str, new_queue: Any, raw_client: redis.Redis
) -> None:
    async with AsyncRedisTransport(redis_url, queue=new_queue()) as transport:
        await transport.publish("g", Event(kind="k"))
        raw_client.script_flush()
        lease = await transport.claim()
        assert lease is not None
        raw_client.script_flush()
        assert await transport.ack(lease)
        raw_client.script_flush()
        assert (await transport.stats()).messages == 0


def test_leases_are_timed_by_the_server_clock(
    transport_factory: Any, raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="k"))
    seconds, micros = raw_client.time()
    before = seconds + micros / 1e6
    lease = transport.claim(100.0)
    seconds, micros = raw_client.time()
    after = seconds + micros / 1e6
    assert lease is not None
    assert before + 100.0 <= lease.expires_at <= after + 100.0


def test_injected_clock_is_used_exactly(transport_factory: Any) -> None:
    now = 1_800_000_000.123456
    transport = transport_factory(clock=lambda: now)
    transport.publish("g", Event(kind="k"))
    lease = transport.claim(0.1)
    assert lease is not None
    assert lease.expires_at == now + 0.1  # bit for bit: times cross as full-precision text
    parked = transport.nack(lease, delay=1e-6)
    assert parked
    assert transport.stats().next_resume_at == now + 1e-6
    assert time.time() < now  # the wall clock played no part


class _FlushAfterLoad(redis.Redis):
    """A real client whose SCRIPT LOAD is followed at once by a SCRIPT FLUSH: the server
    forgets every script between a reload and the call that needed it (as when it restarts
    there, or another client flushes)."""

    def script_load(self, script: Any) -> Any:
        sha = super().script_load(script)
        self.script_flush()
        return sha


def test_a_script_forgotten_again_after_its_reload_still_runs_once(
    redis_url: str, new_queue: Any, raw_client: redis.Redis
) -> None:
    from pgque.redis import RedisTransport

    client = _FlushAfterLoad.from_url(redis_url)
    with client, RedisTransport(client=client, queue=new_queue()) as transport:
        raw_client.script_flush()
        first = transport.publish("g", Event(kind="k", data=1))
        raw_client.script_flush()
        lease = transport.claim(60)
        assert lease is not None
        assert lease.message_id == first
        raw_client.script_flush()
        assert transport.ack(lease)
        assert transport.stats().messages == 0


def test_a_partition_script_forgotten_again_after_its_reload_still_runs(
    redis_url: str, new_queue: Any, raw_client: redis.Redis
) -> None:
    from pgque.partition import KeyedPublisher, Ordered
    from pgque.redis import RedisTransport

    client = _FlushAfterLoad.from_url(redis_url)
    with client, RedisTransport(client=client, queue=new_queue()) as transport:
        publisher = KeyedPublisher(transport, tier=Ordered())
        raw_client.script_flush()
        message_id, deduped = publisher.send(
            "k", {"n": 1}, partition_key="tenant-1", dedup_key="d1", dedup_ttl=60
        )
        assert not deduped
        raw_client.script_flush()
        again, deduped = publisher.send(
            "k", {"n": 1}, partition_key="tenant-1", dedup_key="d1", dedup_ttl=60
        )
        assert (again, deduped) == (message_id, True)
        lease = transport.claim(60)
        assert lease is not None
        assert lease.message_id == message_id
