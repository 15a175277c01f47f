"""Enable the conformance suite on the in-memory transports.

Each test gets one :class:`MemoryStore`; every transport the factories open shares it, as
workers share a database. A transport opened without ``queue=`` gets a fresh queue name.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from pgque.conformance import AsyncTransportFactory, TransportFactory
from pgque.core import (
    AsyncInMemoryTransport,
    AsyncTransport,
    ConnectionLost,
    InMemoryTransport,
    MemoryStore,
    Transport,
)
from pgque.core.queue_model import QueueModel


def _fresh_queue() -> str:
    return f"q_{uuid.uuid4().hex[:20]}"


@pytest.fixture
def memory_store() -> MemoryStore:
    """Return the store every transport of this test shares."""
    return MemoryStore()


class _UnreachableStore(MemoryStore):
    """A store that fails like a server nobody can reach: the memory backend's "I/O"."""

    def model(self, queue: str) -> QueueModel:
        raise ConnectionLost(f"queue {queue!r} is unreachable (test store)")


@pytest.fixture
def offline_transport() -> Iterator[Transport]:
    """A transport whose store cannot be reached, to show checks run before any access."""
    transport = InMemoryTransport(store=_UnreachableStore(), queue=_fresh_queue())
    yield transport
    transport.close()


@pytest.fixture
def offline_async_transport() -> AsyncTransport:
    """The asyncio twin of :func:`offline_transport`.

    A plain fixture: the suite looks it up from inside a running test, where an async fixture
    cannot be set up; the memory transport holds nothing that needs closing.
    """
    return AsyncInMemoryTransport(store=_UnreachableStore(), queue=_fresh_queue())


@pytest.fixture
def transport_factory(memory_store: MemoryStore) -> Iterator[TransportFactory]:
    """Open blocking in-memory transports; close them all at teardown."""
    opened: list[InMemoryTransport] = []

    def make(**options: Any) -> Transport:
        options.setdefault("queue", _fresh_queue())
        transport = InMemoryTransport(store=memory_store, **options)
        opened.append(transport)
        return transport

    yield make
    for transport in opened:
        transport.close()


@pytest_asyncio.fixture
async def async_transport_factory(
    memory_store: MemoryStore,
) -> AsyncIterator[AsyncTransportFactory]:
    """Open asyncio in-memory transports; close them all at teardown."""
    opened: list[AsyncInMemoryTransport] = []

    async def amake(**options: Any) -> AsyncTransport:
        options.setdefault("queue", _fresh_queue())
        transport = AsyncInMemoryTransport(store=memory_store, **options)
        opened.append(transport)
        return transport

    yield amake
    for transport in opened:
        await transport.close()
