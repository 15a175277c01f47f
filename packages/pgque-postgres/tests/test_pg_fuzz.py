"""Fuzz the blocking PostgreSQL transport against the reference model with hostile inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pgque.conformance import TransportFactory
from pgque.conformance.fuzz import *  # noqa: F403
from pgque.core import Transport
from pgque.postgres import PostgresTransport


@pytest.fixture
def transport_factory(transport_factory: Callable[..., PostgresTransport]) -> TransportFactory:
    """Open blocking Postgres transports on fresh queues, purged at teardown."""

    def make(**options: Any) -> Transport:
        return transport_factory(min_size=1, max_size=1, **options)

    return make
