"""The hostile-input catalogue on the asyncio Redis transport.

``offline_async_transport`` points at a port nobody listens on: every catalogue call must still
raise InvalidInput (not ConnectionLost), so the checks run before any I/O.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from pgque.conformance import AsyncTransportFactory
from pgque.conformance.hostile_async import *  # noqa: F403
from pgque.core import AsyncTransport
from pgque.redis import AsyncRedisTransport


@pytest_asyncio.fixture
async def async_transport_factory(
    redis_url: str, new_queue: Callable[[], str]
) -> AsyncIterator[AsyncTransportFactory]:
    """Open asyncio Redis transports on fresh queues (deleted at teardown); close them."""
    opened: list[AsyncRedisTransport] = []

    async def amake(**options: Any) -> AsyncTransport:
        options.setdefault("queue", new_queue())
        transport = AsyncRedisTransport(redis_url, **options)
        opened.append(transport)
        return transport

    yield amake
    for transport in opened:
        await transport.close()


@pytest.fixture
def offline_async_transport() -> AsyncRedisTransport:
    """Return a transport on a server that does not exist (it never connects, so it holds
    nothing to close; a sync fixture, because the test looks it up from inside its loop)."""
    return AsyncRedisTransport("redis://:secret@127.0.0.1:9/0", retries=0)
