"""Enable the conformance suite on the Redis transports.

Every transport a test opens talks to the test server; one opened without ``queue=`` gets a
fresh queue name, and the keys of every such queue are deleted at teardown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio

from pgque.conformance import AsyncTransportFactory, TransportFactory
from pgque.core import AsyncTransport, Transport
from pgque.redis import AsyncRedisTransport, RedisTransport


@pytest.fixture
def transport_factory(redis_url: str, new_queue: Callable[[], str]) -> Iterator[TransportFactory]:
    """Open blocking Redis transports; close them all at teardown."""
    opened: list[RedisTransport] = []

    def make(**options: Any) -> Transport:
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
) -> AsyncIterator[AsyncTransportFactory]:
    """Open asyncio Redis transports; close them all at teardown."""
    opened: list[AsyncRedisTransport] = []

    async def amake(**options: Any) -> AsyncTransport:
        if "queue" not in options:
            options["queue"] = new_queue()
        transport = AsyncRedisTransport(redis_url, **options)
        opened.append(transport)
        return transport

    yield amake
    for transport in opened:
        await transport.close()
