"""Enable the conformance suite on the sharded layer over three in-memory shards.

Each test gets one :class:`MemoryStore`; the three shards are three sub-queues of it, as
three queues of one server would be (the suite over three PostgreSQL servers is
``nox -s conformance-sharded-postgres``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from pgque.conformance import AsyncTransportFactory, TransportFactory
from pgque.conformance.sharded import sharded_async_factory, sharded_factory
from pgque.core import (
    AsyncInMemoryTransport,
    AsyncTransport,
    InMemoryTransport,
    MemoryStore,
    Transport,
)

#: How many shards the suite runs over.
SHARDS = 3


@pytest.fixture
def memory_store() -> MemoryStore:
    """Return the store every shard of this test shares."""
    return MemoryStore()


@pytest.fixture
def transport_factory(memory_store: MemoryStore) -> Iterator[TransportFactory]:
    """Open blocking sharded transports over in-memory shards; close them at teardown."""
    opened: list[Transport] = []

    def shard(**options: Any) -> Transport:
        transport = InMemoryTransport(store=memory_store, **options)
        opened.append(transport)
        return transport

    yield sharded_factory([shard] * SHARDS)
    for transport in opened:
        transport.close()


@pytest_asyncio.fixture
async def async_transport_factory(
    memory_store: MemoryStore,
) -> AsyncIterator[AsyncTransportFactory]:
    """Open asyncio sharded transports over in-memory shards; close them at teardown."""
    opened: list[AsyncTransport] = []

    async def shard(**options: Any) -> AsyncTransport:
        transport = AsyncInMemoryTransport(store=memory_store, **options)
        opened.append(transport)
        return transport

    yield sharded_async_factory([shard] * SHARDS)
    for transport in opened:
        await transport.close()
