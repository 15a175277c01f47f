"""The skeleton every built-in transport shares: capabilities, queue, repr, the closed check."""

from __future__ import annotations

import pytest

from pgque.core import (
    AsyncInMemoryTransport,
    Capabilities,
    InMemoryTransport,
    TransportClosed,
    TransportOptions,
)
from pgque.core.transport_base import TransportBase


class _Tiny(TransportBase):
    CAPABILITIES = Capabilities(priorities=False)

    def close(self) -> None:
        self._closed = True


def test_the_skeleton_gives_capabilities_queue_repr_and_the_closed_check() -> None:
    tiny = _Tiny(TransportOptions(queue="orders"))
    assert tiny.capabilities == Capabilities(priorities=False)
    assert tiny.queue == "orders"
    assert repr(tiny) == "_Tiny(queue='orders')"
    tiny._check_open()
    tiny.close()
    with pytest.raises(TransportClosed):
        tiny._check_open()


def test_the_memory_transports_are_built_on_it() -> None:
    for transport in (InMemoryTransport(queue="q"), AsyncInMemoryTransport(queue="q")):
        assert isinstance(transport, TransportBase)
        assert transport.capabilities is type(transport).CAPABILITIES
        assert repr(transport) == f"{type(transport).__name__}(queue='q')"
