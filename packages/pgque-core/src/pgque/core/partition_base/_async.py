"""The generic partition adapter (asyncio API): the base of every backend's own."""

# The source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pgque.core.client._checks import traced_event
from pgque.core.contract import AsyncTransport
from pgque.core.driver import Publication
from pgque.core.errors import ConfigurationError, PgqueError
from pgque.core.models import Event
from pgque.core.partition_base._grant import Grant
from pgque.core.transport_options import TransportOptions
from pgque.core.validation import DEFAULT_MAX_EVENT_BYTES

__all__ = ["AsyncPartitionAdapterBase"]

log = logging.getLogger("pgque.partition")


class AsyncPartitionAdapterBase:
    """What pgque.partition's tiers ask of a transport beyond its contract (asyncio API).

    This generic adapter publishes through the transport and refuses (ConfigurationError) a
    dedup window, a slot count and a key lock, which it cannot make atomic on a transport it
    knows nothing about. A backend's adapter derives from it and overrides what its store
    offers: for a dedup window :meth:`publish_dedup`, which gets the event as text within the
    transport's size limit; for a fenced key lock with a TTL :meth:`take_key_lock` and
    :meth:`release_key_lock` (or :meth:`key_lock` itself, for another kind of lock).
    pgque.partition checks the arguments first. *lock_pool* is for key locks held in a
    database session (PostgreSQL).
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

    def _clock(self) -> float | None:
        """The transport's injected clock's time (tests), or None: the store's clock judges."""
        clock = getattr(self.transport, "clock", None)
        return None if clock is None else float(clock())

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        """Append *event* unless *dedup* (key, ttl) names a publish within its window; return
        (message id, deduplicated). Raises InvalidInput for an event the transport would refuse,
        ConfigurationError when it cannot deduplicate."""
        if dedup is None:
            return await self.transport.publish(group_id, event, priority=priority), False
        options = getattr(self.transport, "_transport_options", None)
        limit = (
            options.max_event_bytes
            if isinstance(options, TransportOptions)
            else DEFAULT_MAX_EVENT_BYTES
        )
        # The text carries the trace context as the front door's publish would store it.
        item = Publication(group_id, event, traced_event(event, limit)[1])
        return await self.publish_dedup(item, priority, dedup[0], dedup[1], self._clock())

    async def publish_dedup(
        self, item: Publication, priority: int, key: str, ttl: float, now: float | None
    ) -> tuple[int, bool]:
        """Append *item* unless *key* published within its window (*ttl* seconds from that
        publish, judged at *now* or, if None, the store's time), in one atomic step."""
        raise ConfigurationError(f"{type(self.transport).__name__} has no dedup window")

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
        """Hold *key*'s lock for the block, for at most *ttl* seconds where the lock expires
        (it yields None while another worker holds it).

        This one is a fenced lock with a TTL: :meth:`take_key_lock` under a token of its own,
        the block, then :meth:`release_key_lock`. A release that fails is logged, not raised:
        the block has run, and failing now would make the worker run the handler again; the
        lock ends with its TTL, and exclusion holds meanwhile.
        """
        token = uuid.uuid4().hex
        epoch = await self.take_key_lock(key, token, ttl)
        if epoch is None:
            yield None
            return
        try:
            yield Grant(epoch=epoch)
        finally:
            try:
                await self.release_key_lock(key, token)
            except PgqueError as exc:
                log.warning(
                    "could not release the lock of key %r (it expires with its TTL): %s", key, exc
                )

    async def take_key_lock(self, key: str, token: str, ttl: float) -> int | None:
        """Take *key*'s lock for *ttl* seconds under *token* unless another holder has it:
        return its fencing epoch (larger with each grant of the key), else None."""
        raise ConfigurationError(
            f"{type(self.transport).__name__} has no key lock; use the Ordered tier"
        )

    async def release_key_lock(self, key: str, token: str) -> None:
        """Release *key*'s lock if *token* still holds it (a holder past its TTL must not free
        the next holder's lock)."""

    def check_concurrency(self, concurrency: int) -> None:
        """Refuse (ConfigurationError) *concurrency* lock holders at once where they would
        share one lock session."""

    def claim_lock_session(self, consumer: object) -> None:
        """Record that *consumer* takes key locks; refuse (ConfigurationError) one that would
        share a lock session with another."""

    def free_lock_session(self, consumer: object) -> None:
        """Forget *consumer*'s claim on its lock session (its run has ended)."""

    async def purge(self) -> None:
        """Forget the queue's dedup keys and slot count (tests, operators)."""
