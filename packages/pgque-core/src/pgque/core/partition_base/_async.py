"""The generic partition adapter (asyncio API): the base of every backend's own.

Plain publishes; a ConfigurationError for a dedup window, a persisted slot count or a key lock,
which this adapter cannot make atomic on a transport it knows nothing about.
"""

# The source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pgque.core.contract import AsyncTransport
from pgque.core.errors import ConfigurationError
from pgque.core.models import Event
from pgque.core.partition_base._grant import Grant

__all__ = ["AsyncPartitionAdapterBase"]


class AsyncPartitionAdapterBase:
    """The generic partition adapter (asyncio API): plain publishes; no dedup, persisted
    slots or key locks. A backend's adapter derives from it and overrides what it supports.

    *lock_pool* is for adapters whose key locks live in a database session (PostgreSQL);
    the others ignore it.
    """

    #: The adapter's name in messages and reprs (``memory``, ``postgresql``, ``redis``...).
    name: str = "generic"
    #: Whether :meth:`key_lock` can grant a lock (the Exclusive tier needs it).
    key_locks: bool = False

    def __init__(self, transport: AsyncTransport, *, lock_pool: Any = None) -> None:
        self.transport: Any = transport

    def __repr__(self) -> str:
        return f"{type(self).__name__}(queue={self.queue!r})"

    @property
    def queue(self) -> str:
        """The transport's queue."""
        return str(self.transport.queue)

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        """Append *event*, unless *dedup* (key, ttl) names a publish within its window.

        Returns (message id, deduplicated). Raises ConfigurationError when dedup is asked of a
        transport that cannot make it atomic.
        """
        if dedup is not None:
            raise ConfigurationError(f"{type(self.transport).__name__} has no dedup window")
        return await self.transport.publish(group_id, event, priority=priority), False

    async def ensure_slots(self, slots: int) -> int:
        """Persist *slots* as the queue's slot count unless it has one; return the one in force."""
        raise ConfigurationError(
            f"{type(self.transport).__name__} cannot persist a slot count; use Ordered()"
        )

    async def reset_slots(self) -> bool:
        """Forget the slot count of a drained queue; False if it has messages or no count."""
        raise ConfigurationError(f"{type(self.transport).__name__} keeps no slot count")

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        """Hold *key*'s lock for the block (None: another worker holds it).

        Raises ConfigurationError here: the generic adapter has no key lock.
        """
        yield self._no_lock()

    def check_concurrency(self, concurrency: int) -> None:
        """Refuse *concurrency* lock holders at once where they would share one lock session.

        Raises ConfigurationError (PostgreSQL on one injected connection without a lock pool).
        """

    def claim_lock_session(self, consumer: object) -> None:
        """Record that *consumer* takes key locks, refusing a second one where both would
        share one lock session.

        Raises ConfigurationError (PostgreSQL on one injected connection without a lock pool,
        while another such consumer exists and has not finished a run).
        """

    def free_lock_session(self, consumer: object) -> None:
        """Forget *consumer*'s claim on its lock session (its run has ended)."""

    async def purge(self) -> None:
        """Forget the queue's dedup keys and slot count (tests, operators)."""

    def _no_lock(self) -> Grant | None:
        raise ConfigurationError(
            f"{type(self.transport).__name__} has no key lock; use the Ordered tier"
        )
