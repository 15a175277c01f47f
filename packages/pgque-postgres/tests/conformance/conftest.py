"""Enable the conformance suite on the PostgreSQL transports (blocking API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pgque.conformance import TransportFactory
from pgque.core import Transport
from pgque.postgres import PostgresTransport


@pytest.fixture
def transport_factory(
    new_transport: Callable[..., PostgresTransport],
) -> TransportFactory:
    """Open blocking Postgres transports; fresh queues are purged at teardown."""

    def make(**options: Any) -> Transport:
        return new_transport(**options)

    return make
