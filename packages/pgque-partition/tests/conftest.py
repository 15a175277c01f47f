"""Fixtures of pgque-partition's tests: transports on memory, PostgreSQL and Redis.

The servers are the pgque-conformance plugin's ``postgres_url`` / ``redis_url``
(``PGQUE_TEST_POSTGRES_URL`` / ``PGQUE_TEST_REDIS_URL`` or throwaway ones). Every queue a test
creates is purged at teardown. The experiments run at a CI size by default; ``--partition-full`` (or
``PGQUE_PARTITION_FULL=1``) runs them at the issue's full size.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from _partition_support import AMake, Make, _drop_redis, fresh_queue

from pgque.core import AsyncTransport, Transport
from pgque.core.memory import AsyncInMemoryTransport, InMemoryTransport, MemoryStore
from pgque.partition import partition_backend
from pgque.postgres import PostgresTransport
from pgque.postgres_async import AsyncPostgresTransport
from pgque.redis import AsyncRedisTransport, RedisTransport

BACKENDS = ["memory", "postgres", "redis"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--partition-full",
        action="store_true",
        default=False,
        help="run the partition experiments at the issue's full size",
    )


@pytest.fixture(scope="session")
def full(request: pytest.FixtureRequest) -> bool:
    """Return True for the full-size experiments."""
    return bool(request.config.getoption("--partition-full")) or (
        os.environ.get("PGQUE_PARTITION_FULL") == "1"
    )


@pytest.fixture(scope="session")
def postgres_url(postgres_url: str) -> str:
    """Return the test server's URL (the pgque-conformance plugin's), its schema installed."""
    PostgresTransport.from_dsn(postgres_url, min_size=1, max_size=1).close()
    return postgres_url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Return the name of the backend under test."""
    return str(request.param)


@pytest.fixture
def transport_factory(backend: str, request: pytest.FixtureRequest) -> Iterator[Make]:
    """Return ``make(queue=None, **options)``: a blocking transport of the backend under test.

    Without *queue* it opens a fresh queue; with it, another transport on that queue. Opened
    transports are closed and fresh queues purged at teardown.
    """
    store = MemoryStore()
    opened: list[Transport] = []
    fresh: list[str] = []
    url = ""
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
    elif backend == "redis":
        url = request.getfixturevalue("redis_url")

    def make(queue: str | None = None, **options: Any) -> Transport:
        if queue is None:
            queue = fresh_queue()
            fresh.append(queue)
        transport: Transport
        if backend == "memory":
            transport = InMemoryTransport(store=store, queue=queue, **options)
        elif backend == "postgres":
            options.setdefault("min_size", 1)
            options.setdefault("max_size", 8)
            transport = PostgresTransport.from_dsn(url, queue=queue, **options)
        else:
            transport = RedisTransport(url, queue=queue, **options)
        opened.append(transport)
        return transport

    yield make
    for transport in opened:
        transport.close()
    for queue in fresh:
        if backend == "postgres":
            with PostgresTransport.from_dsn(url, queue=queue, max_size=1) as janitor:
                janitor.purge()
                partition_backend(janitor).purge()
        elif backend == "redis":
            _drop_redis(url, queue)


@pytest_asyncio.fixture
async def async_transport_factory(
    backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[AMake]:
    """Return ``await amake(queue=None, **options)``: the asyncio twin of transport_factory."""
    store = MemoryStore()
    opened: list[AsyncTransport] = []
    fresh: list[str] = []
    url = ""
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
    elif backend == "redis":
        url = request.getfixturevalue("redis_url")

    async def amake(queue: str | None = None, **options: Any) -> AsyncTransport:
        if queue is None:
            queue = fresh_queue()
            fresh.append(queue)
        transport: AsyncTransport
        if backend == "memory":
            transport = AsyncInMemoryTransport(store=store, queue=queue, **options)
        elif backend == "postgres":
            options.setdefault("min_size", 1)
            options.setdefault("max_size", 8)
            transport = await AsyncPostgresTransport.from_dsn(url, queue=queue, **options)
        else:
            transport = AsyncRedisTransport(url, queue=queue, **options)
        opened.append(transport)
        return transport

    yield amake
    for transport in opened:
        await transport.close()
    for queue in fresh:
        if backend == "postgres":
            with PostgresTransport.from_dsn(url, queue=queue, max_size=1) as janitor:
                janitor.purge()
                partition_backend(janitor).purge()
        elif backend == "redis":
            _drop_redis(url, queue)
