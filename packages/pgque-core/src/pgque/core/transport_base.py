"""The bones every pgque transport shares: capabilities, queue, ``repr`` and the closed check.

A backend's transport classes (blocking and asyncio alike: nothing here does I/O) derive from
:class:`TransportBase`, set :attr:`TransportBase.CAPABILITIES`, call
``TransportBase.__init__`` with their validated :class:`~pgque.core.TransportOptions` and
name what their ``repr`` shows in :meth:`TransportBase._repr_fields`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from pgque.core.errors import TransportClosed
from pgque.core.models import Capabilities
from pgque.core.transport_options import TransportOptions

__all__ = ["TransportBase"]


class TransportBase:
    """What every transport has: ``capabilities``, ``queue``, a ``repr`` and a closed flag.

    The contract's methods are the subclass's own; this class only keeps the parts that were
    the same in each of them.
    """

    #: What the transport class supports (the subclass sets it).
    CAPABILITIES: ClassVar[Capabilities] = Capabilities()

    def __init__(self, options: TransportOptions) -> None:
        """Keep the validated *options*; the transport starts open. Raises nothing."""
        self._transport_options = options
        self._closed = False

    @property
    def capabilities(self) -> Capabilities:
        """What this transport supports."""
        return self.CAPABILITIES

    @property
    def queue(self) -> str:
        """The queue name this transport works on."""
        return self._transport_options.queue

    @property
    def clock(self) -> Callable[[], float] | None:
        """The injected clock (epoch seconds; for tests only), or None: the server's clock."""
        return self._transport_options.clock

    def _check_open(self) -> None:
        """Raise TransportClosed when the transport was closed."""
        if self._closed:
            raise TransportClosed()

    def _repr_fields(self) -> list[str]:
        """Return what ``repr`` shows between the parentheses; the queue by default."""
        return [f"queue={self.queue!r}"]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self._repr_fields())})"
