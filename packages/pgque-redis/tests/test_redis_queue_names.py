"""Queue names users pick (``orders-v2``, ``Billing.EU``) work end to end on Redis.

A name is the hash tag of its keys (``{pgque:orders-v2}:...``); the grammar keeps out every
character that would end or split the tag (``{``, ``}``, ``:``). ``queues()`` lists them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis

from pgque.core import Event, InvalidInput
from pgque.redis import AsyncRedisTransport, RedisTransport
from pgque.redis._keys import queue_of_marker

NAMES = ["orders-v2", "Billing.EU", "billing.eu"]


@pytest.fixture
def clean(redis_url: str) -> Iterator[None]:
    def purge() -> None:
        for name in NAMES:
            with RedisTransport(redis_url, queue=name) as transport:
                transport.purge()

    purge()
    yield None
    purge()


def test_user_queue_names_publish_claim_ack_and_list(redis_url: str, clean: None) -> None:
    opened = [RedisTransport(redis_url, queue=name) for name in NAMES]
    try:
        for transport in opened:
            transport.publish("g", Event(kind=f"k.{transport.queue}"))
        listed = opened[0].queues()
        assert set(NAMES) <= set(listed)
        assert listed == sorted(listed, key=lambda n: n.encode())
        for transport in opened:
            lease = transport.claim(30.0)
            assert lease is not None
            assert lease.event.kind == f"k.{transport.queue}"
            assert transport.claim(30.0) is None
            assert transport.ack(lease) is True
        assert not set(NAMES) & set(opened[0].queues())
    finally:
        for transport in opened:
            transport.close()


def test_a_dead_letter_keeps_its_queue_listed(redis_url: str, clean: None) -> None:
    with RedisTransport(redis_url, queue="orders-v2") as transport:
        transport.publish("g", Event(kind="k"))
        lease = transport.claim(30.0)
        assert lease is not None
        assert transport.dead_letter(lease, "bad")
        assert transport.stats().messages == 0
        assert "orders-v2" in transport.queues()


def test_a_group_key_that_looks_like_a_marker_is_not_a_queue(
    redis_url: str, raw_client: redis.Redis, clean: None
) -> None:
    with RedisTransport(redis_url, queue="orders-v2") as transport:
        transport.publish("x}:enq", Event(kind="k"))  # its list key ends in "}:enq"
        assert raw_client.exists("{pgque:orders-v2}:q:x}:enq")
        assert "orders-v2}:q:x" not in transport.queues()
        assert "orders-v2" in transport.queues()
    assert queue_of_marker("{pgque:orders-v2}:q:x}:enq") is None
    assert queue_of_marker("{pgque:Billing.EU}:dead") == "Billing.EU"
    assert queue_of_marker("{other:x}:enq") is None


def test_async_user_queue_names(redis_url: str, clean: None) -> None:
    async def scenario() -> None:
        async with AsyncRedisTransport(redis_url, queue="Billing.EU") as transport:
            await transport.publish("g", Event(kind="k"))
            assert "Billing.EU" in await transport.queues()
            lease = await transport.claim(30.0)
            assert lease is not None
            assert await transport.ack(lease)
            assert "Billing.EU" not in await transport.queues()

    asyncio.run(scenario())


@pytest.mark.parametrize("name", ["-v2", "orders v2", "orders:v2", "o" * 65, "Bill{ing}"])
def test_names_outside_the_grammar_are_refused(redis_url: str, name: str) -> None:
    with pytest.raises(InvalidInput, match="queue name"):
        RedisTransport(redis_url, queue=name)
    with pytest.raises(InvalidInput, match="queue name"):
        AsyncRedisTransport(redis_url, queue=name)
