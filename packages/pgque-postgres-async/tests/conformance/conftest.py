"""Enable the conformance suite on the asyncio PostgreSQL transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest_asyncio

from pgque.conformance import AsyncTransportFactory
from pgque.core import AsyncTransport
from pgque.postgres_async import AsyncPostgresTransport


@pytest_asyncio.fixture
async def async_transport_factory(
    new_atransport: Callable[..., Awaitable[AsyncPostgresTransport]],
) -> AsyncIterator[AsyncTransportFactory]:
    """Open asyncio Postgres transports; fresh queues are purged at teardown."""

    async def amake(**options: Any) -> AsyncTransport:
        return await new_atransport(**options)

    yield amake
