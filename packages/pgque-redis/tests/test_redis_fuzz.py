"""Fuzz the blocking Redis transport against the reference model with hostile inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pgque.conformance import TransportFactory
from pgque.conformance.fuzz import *  # noqa: F403
from pgque.core import Transport


@pytest.fixture
def transport_factory(make_transport: Callable[..., Transport]) -> TransportFactory:
    """Open blocking Redis transports on fresh queues, deleted at teardown."""

    def make(**options: Any) -> Transport:
        return make_transport(**options)

    return make
