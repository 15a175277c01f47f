"""The hostile-input catalogue on the asyncio PostgreSQL transport.

``offline_async_transport`` points at a port nobody listens on: every catalogue call must still
raise InvalidInput (not ConnectionLost), so the checks run before any I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from pgque.conformance import AsyncTransportFactory
from pgque.conformance.hostile_async import *  # noqa: F403
from pgque.core import AsyncTransport
from pgque.postgres_async import AsyncPostgresTransport


@pytest_asyncio.fixture
async def async_transport_factory(
    new_atransport: Callable[..., Awaitable[AsyncPostgresTransport]],
) -> AsyncTransportFactory:
    """Open asyncio Postgres transports on fresh queues, purged at teardown."""

    async def amake(**options: Any) -> AsyncTransport:
        return await new_atransport(**options)

    return amake


@pytest.fixture
def offline_async_transport() -> AsyncPostgresTransport:
    """Return a transport on a server that does not exist (it never connects, so it holds
    nothing to close; a sync fixture, because the test looks it up from inside its loop)."""
    return AsyncPostgresTransport("postgresql://nobody:secret@127.0.0.1:9/none", timeout=1)
