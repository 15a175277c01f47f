"""The conformance suite on a real Redis Cluster: the transports open the ``redis+cluster://``
URL of the conformance plugin's six-node ``redis_cluster`` (``nox -s
conformance-redis-cluster``).

The fixtures of the package's conftest are overridden: transports open the cluster URL, and
the keys of each test's queues are deleted through a cluster client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio

from pgque.conformance.servers.redis_cluster import RedisClusterServer
from pgque.redis import AsyncRedisTransport, RedisTransport


@pytest.fixture(scope="session")
def raw_client(redis_cluster: RedisClusterServer) -> Iterator[Any]:
    """Return a cluster client (for inspecting and deleting a test's keys)."""
    client = redis_cluster.client()
    yield client
    client.close()


def _url(redis_cluster_url: str, options: dict[str, Any]) -> str:
    return f"{redis_cluster_url}?queue={options.pop('queue')}"


@pytest.fixture
def transport_factory(
    redis_cluster_url: str, new_queue: Callable[[], str]
) -> Iterator[Callable[..., RedisTransport]]:
    """Open blocking cluster transports on fresh queues (or ``queue=``); close them after."""
    opened: list[RedisTransport] = []

    def make(**options: Any) -> RedisTransport:
        options.setdefault("queue", new_queue())
        transport = RedisTransport(_url(redis_cluster_url, options), **options)
        opened.append(transport)
        return transport

    yield make
    for transport in opened:
        transport.close()


@pytest_asyncio.fixture
async def async_transport_factory(
    redis_cluster_url: str, new_queue: Callable[[], str]
) -> AsyncIterator[Callable[..., Awaitable[AsyncRedisTransport]]]:
    """Open asyncio cluster transports on fresh queues (or ``queue=``); close them after."""
    opened: list[AsyncRedisTransport] = []

    async def amake(**options: Any) -> AsyncRedisTransport:
        options.setdefault("queue", new_queue())
        transport = AsyncRedisTransport(_url(redis_cluster_url, options), **options)
        opened.append(transport)
        return transport

    yield amake
    for transport in opened:
        await transport.close()
