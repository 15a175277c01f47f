"""The hostile-input catalogue on the asyncio Redis transport.

``offline_async_transport`` points at a port nobody listens on: every catalogue call must still
raise InvalidInput (not ConnectionLost), so the checks run before any I/O.
"""

from __future__ import annotations

import pytest

from pgque.conformance.hostile_async import *  # noqa: F403
from pgque.redis import AsyncRedisTransport


@pytest.fixture
def offline_async_transport() -> AsyncRedisTransport:
    """Return a transport on a server that does not exist (it never connects, so it holds
    nothing to close; a sync fixture, because the test looks it up from inside its loop)."""
    return AsyncRedisTransport("redis://:secret@127.0.0.1:9/0", retries=0)
