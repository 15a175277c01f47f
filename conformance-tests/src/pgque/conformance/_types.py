"""The fixture types a backend's ``conftest.py`` provides to the suite."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pgque.core import AsyncTransport, Transport

__all__ = ["AsyncTransportFactory", "TransportFactory"]

#: ``make(**options) -> Transport``: a fresh unique queue unless ``queue=`` is given, in which
#: case another transport on that queue (a second worker). Options: ``queue``, ``max_attempts``,
#: ``on_exhausted``, ``clock``. The fixture closes what it opened at teardown.
TransportFactory = Callable[..., Transport]

#: ``await amake(**options) -> AsyncTransport`` (opened); same rules as :data:`TransportFactory`.
AsyncTransportFactory = Callable[..., Awaitable[AsyncTransport]]
