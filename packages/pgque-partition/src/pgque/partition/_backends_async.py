"""What the partition layer needs from each backend (asyncio API): an atomic deduplicated
publish, the persisted slot count, and the Exclusive tier's per-key lock.

:class:`AsyncPartitionBackend` is the protocol of a transport's *partition adapter*. Each backend
ships its own beside its transport and registers it in the entry-point group
``pgque.partition_adapters`` (PostgreSQL: a server-side function and a transaction-scoped
advisory lock; Redis: a Lua script and a fenced ``SET NX PX``; memory: the store's own lock).
A transport no adapter serves gets the generic one: plain publishes only
(:class:`pgque.core.partition_base.AsyncPartitionAdapterBase`).
"""

# The source of its blocking twin, _backends_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import inspect
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from pgque.core.contract import AsyncTransport
from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import Event
from pgque.core.partition_base import AsyncPartitionAdapterBase, Grant
from pgque.partition._adapters import adapter_factory

__all__ = ["Grant", "AsyncPartitionBackend", "partition_backend"]

#: True in the asyncio module, False in its blocking twin.
_ASYNCIO = True  # async-only
# sync: _ASYNCIO = False


@runtime_checkable
class AsyncPartitionBackend(Protocol):
    """A transport's partition adapter (asyncio API): what the tiers need beyond the contract.

    Backends build theirs on :class:`pgque.core.partition_base.AsyncPartitionAdapterBase` (the
    generic adapter) and register them in ``pgque.partition_adapters``;
    :func:`partition_backend_async <pgque.partition.partition_backend_async>` finds them.
    """

    #: The adapter's name (``memory``, ``postgresql``, ``redis``, ``generic``...).
    name: str
    #: Whether :meth:`key_lock` can grant a lock (the Exclusive tier needs it).
    key_locks: bool

    @property
    def queue(self) -> str:
        """The transport's queue."""

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        """Append *event*, unless *dedup* (key, ttl) names a publish within its window.

        Returns (message id, deduplicated); the check and the append are one atomic step.
        Raises ConfigurationError when the transport cannot deduplicate.
        """

    async def ensure_slots(self, slots: int) -> int:
        """Persist *slots* as the queue's slot count unless it has one; return the one in force."""

    async def reset_slots(self) -> bool:
        """Forget the slot count of a drained queue; False if it has messages or no count."""

    def key_lock(self, key: str, ttl: float) -> AbstractAsyncContextManager[Grant | None]:
        """Hold *key*'s lock for the block (it yields None while another worker holds it)."""

    def check_concurrency(self, concurrency: int) -> None:
        """Refuse *concurrency* lock holders at once where they would share one lock session."""

    def claim_lock_session(self, consumer: object) -> None:
        """Record that *consumer* takes key locks; refuse one that would share a lock session."""

    def free_lock_session(self, consumer: object) -> None:
        """Forget *consumer*'s claim on its lock session (its run has ended)."""

    async def purge(self) -> None:
        """Forget the queue's dedup keys and slot count (tests, operators)."""


def partition_backend(transport: AsyncTransport, *, lock_pool: Any = None) -> AsyncPartitionBackend:
    """Return the partition adapter of *transport*: the one its backend registered in
    ``pgque.partition_adapters`` (memory, PostgreSQL, Redis), else the generic adapter.

    *lock_pool* (PostgreSQL): a psycopg pool for the Exclusive tier's lock transactions;
    default: the transport's own pool. Raises InvalidInput for a transport of the other
    flavour (blocking or asyncio) whose backend has an adapter, ConfigurationError when a
    registered adapter fails to load.
    """
    factory = adapter_factory(transport)
    if factory is None:
        return AsyncPartitionAdapterBase(transport, lock_pool=lock_pool)
    adapter = factory(transport, lock_pool=lock_pool)
    if not isinstance(adapter, AsyncPartitionBackend):
        raise ConfigurationError(
            f"the partition adapter {type(adapter).__name__} of {type(transport).__name__} "
            "does not implement pgque.partition.AsyncPartitionBackend"
        )
    if inspect.iscoroutinefunction(adapter.publish) != _ASYNCIO:
        kind = "a blocking" if _ASYNCIO else "an asyncio"
        other = "partition_backend" if _ASYNCIO else "partition_backend_async"
        raise InvalidInput(f"{type(transport).__name__} is {kind} transport; use {other}")
    return adapter
