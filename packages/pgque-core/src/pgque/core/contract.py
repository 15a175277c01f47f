"""The two protocols a backend implements: :class:`Transport` (sync) and
:class:`AsyncTransport` (every method ``async``). They are identical apart from ``async``.

Backends need not inherit from these; ``isinstance(obj, Transport)`` checks the shape, and the
conformance suite checks the behaviour. Abilities beyond the contract are protocols of their own,
each matched by a :class:`~pgque.core.Capabilities` flag: :class:`SupportsWakeups` (``wakeups``)
and :class:`SupportsPurge` (``purge``), with their asyncio twins.

Semantics, in short (docs/concepts.md has the long form):

- A *group* delivers one message at a time, in publish order. A lease on its head excludes
  every other claimer until ack, nack, expiry or dead-letter.
- ``claim`` serves the claimable group that was served longest ago (never-served groups first,
  ties by group id): round-robin, so one hot group cannot starve cold ones.
- Every write taking a lease is fenced by its token: a stale holder gets ``False``/``None``.
- Delivery is at least once: an expired lease is redelivered with a new token, ``attempt + 1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Protocol, runtime_checkable

from pgque.core.models import Capabilities, DeadLetter, Event, Lease, QueueStats

__all__ = [
    "Transport",
    "AsyncTransport",
    "SupportsWakeups",
    "AsyncSupportsWakeups",
    "SupportsPurge",
    "SupportsQueues",
    "AsyncSupportsQueues",
    "AsyncSupportsPurge",
]


@runtime_checkable
class Transport(Protocol):
    """A per-group FIFO queue (blocking API)."""

    @property
    def capabilities(self) -> Capabilities:
        """What this transport supports."""
        ...

    @property
    def queue(self) -> str:
        """The queue name this transport works on."""
        ...

    def publish(self, group_id: str, event: Event, *, priority: int = 0) -> int:
        """Append *event* to *group_id*'s tail and return its message id (monotonic).

        *priority* (0-4) is fixed by a group's first publish while it has messages.
        Raises InvalidInput for a bad group id, priority or event.
        """
        ...

    def publish_many(self, items: Iterable[tuple[str, Event]], *, priority: int = 0) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids."""
        ...

    def claim(self, visibility: float = 30.0, *, min_priority: int = 0) -> Lease | None:
        """Lease the head of the longest-unserved claimable group, or return None."""
        ...

    def claim_many(self, n: int, visibility: float = 30.0, *, min_priority: int = 0) -> list[Lease]:
        """Lease the heads of up to *n* distinct groups (never two of one group)."""
        ...

    def ack(self, lease: Lease) -> bool:
        """Remove the leased message and free its group; False if the lease is not held."""
        ...

    def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases in one call; one result per lease, in order."""
        ...

    def nack(self, lease: Lease, *, delay: float = 0.0) -> bool:
        """Give the message back; with *delay* > 0 park its whole group for that long."""
        ...

    def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew a held lease to expire *visibility* seconds from now; None if not held."""
        ...

    def dead_letter(self, lease: Lease, reason: str) -> bool:
        """Move the leased message to the dead-letter store; its group continues."""
        ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """List dead letters, oldest first."""
        ...

    def redrive(self, ids: Sequence[int] | None = None) -> int:
        """Re-publish dead letters (all when *ids* is None) to their groups' tails."""
        ...

    def unblock(self, group_id: str, *, drop_head: bool = False) -> bool:
        """Release a group blocked by ``on_exhausted="block"``.

        The head is retried with a fresh attempt count, or dead-lettered when *drop_head*.
        Returns False if the group is not blocked.
        """
        ...

    def stats(self) -> QueueStats:
        """Return counts of groups, messages, in-flight, parked, blocked and dead letters."""
        ...

    def close(self) -> None:
        """Release connections; idempotent."""
        ...

    def __enter__(self) -> Transport: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class AsyncTransport(Protocol):
    """A per-group FIFO queue (asyncio API); the twin of :class:`Transport`."""

    @property
    def capabilities(self) -> Capabilities:
        """What this transport supports."""
        ...

    @property
    def queue(self) -> str:
        """The queue name this transport works on."""
        ...

    async def publish(self, group_id: str, event: Event, *, priority: int = 0) -> int:
        """Append *event* to *group_id*'s tail and return its message id (monotonic)."""
        ...

    async def publish_many(
        self, items: Iterable[tuple[str, Event]], *, priority: int = 0
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids."""
        ...

    async def claim(self, visibility: float = 30.0, *, min_priority: int = 0) -> Lease | None:
        """Lease the head of the longest-unserved claimable group, or return None."""
        ...

    async def claim_many(
        self, n: int, visibility: float = 30.0, *, min_priority: int = 0
    ) -> list[Lease]:
        """Lease the heads of up to *n* distinct groups (never two of one group)."""
        ...

    async def ack(self, lease: Lease) -> bool:
        """Remove the leased message and free its group; False if the lease is not held."""
        ...

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases in one call; one result per lease, in order."""
        ...

    async def nack(self, lease: Lease, *, delay: float = 0.0) -> bool:
        """Give the message back; with *delay* > 0 park its whole group for that long."""
        ...

    async def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew a held lease to expire *visibility* seconds from now; None if not held."""
        ...

    async def dead_letter(self, lease: Lease, reason: str) -> bool:
        """Move the leased message to the dead-letter store; its group continues."""
        ...

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """List dead letters, oldest first."""
        ...

    async def redrive(self, ids: Sequence[int] | None = None) -> int:
        """Re-publish dead letters (all when *ids* is None) to their groups' tails."""
        ...

    async def unblock(self, group_id: str, *, drop_head: bool = False) -> bool:
        """Release a group blocked by ``on_exhausted="block"``."""
        ...

    async def stats(self) -> QueueStats:
        """Return counts of groups, messages, in-flight, parked, blocked and dead letters."""
        ...

    async def close(self) -> None:
        """Release connections; idempotent."""
        ...

    async def __aenter__(self) -> AsyncTransport: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class SupportsWakeups(Protocol):
    """A blocking transport that can wake idle workers (``Capabilities.wakeups``)."""

    def wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news of claimable messages; True if some came.

        A True may be spurious (the caller claims and finds nothing); False means the time
        passed. The first call returns True once it listens (a publish just before it was not
        heard). Raises InvalidInput for a bad timeout, TransportClosed or ConnectionLost.
        """
        ...


@runtime_checkable
class AsyncSupportsWakeups(Protocol):
    """An asyncio transport that can wake idle workers; the twin of :class:`SupportsWakeups`."""

    async def wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news of claimable messages; True if some came.

        As :meth:`SupportsWakeups.wait_for_messages`.
        """
        ...


@runtime_checkable
class SupportsPurge(Protocol):
    """A blocking transport that can empty its queue (``Capabilities.purge``)."""

    def purge(self) -> None:
        """Delete every message, group and dead letter of this queue (tests, operators).

        Raises TransportClosed, ConnectionLost or PgqueError.
        """
        ...


@runtime_checkable
class AsyncSupportsPurge(Protocol):
    """An asyncio transport that can empty its queue; the twin of :class:`SupportsPurge`."""

    async def purge(self) -> None:
        """Delete every message, group and dead letter of this queue (tests, operators).

        Raises TransportClosed, ConnectionLost or PgqueError.
        """
        ...


@runtime_checkable
class SupportsQueues(Protocol):
    """A blocking transport that lists the queues of its store (``Capabilities.queues``)."""

    def queues(self) -> list[str]:
        """Return the names of the store's queues holding messages or dead letters, sorted.

        Raises TransportClosed, ConnectionLost or PgqueError.
        """
        ...


@runtime_checkable
class AsyncSupportsQueues(Protocol):
    """An asyncio transport that lists its store's queues; the twin of :class:`SupportsQueues`."""

    async def queues(self) -> list[str]:
        """Return the names of the store's queues holding messages or dead letters, sorted.

        Raises TransportClosed, ConnectionLost or PgqueError.
        """
        ...
