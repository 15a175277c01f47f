"""The in-memory transport's partition adapter (asyncio API): pgque.partition's dedup window,
persisted slot count and key lock, each one critical section under the store's lock.

Registered in ``pgque.partition_adapters`` for :class:`~pgque.core.memory.AsyncInMemoryTransport`.
"""

# The source of its blocking twin, _partition_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import time
from typing import Any

from pgque.core.driver import Publication
from pgque.core.memory._async import AsyncInMemoryTransport
from pgque.core.memory._partition_state import MemoryPartitionState, state_of
from pgque.core.partition_base import AsyncPartitionAdapterBase

__all__ = ["AsyncMemoryPartitionAdapter"]


class AsyncMemoryPartitionAdapter(AsyncPartitionAdapterBase):
    """The partition adapter of :class:`AsyncInMemoryTransport`: its state lives beside the
    transport's store, so every transport on one store shares it (as workers share a database).
    """

    name = "memory"
    key_locks = True

    def __init__(self, transport: AsyncInMemoryTransport, *, lock_pool: Any = None) -> None:
        super().__init__(transport, lock_pool=lock_pool)
        self._store = transport.store
        self._state = state_of(transport.store)

    @property
    def state(self) -> MemoryPartitionState:
        """The dedup windows, slot counts and key locks of the transport's store."""
        return self._state

    async def publish_dedup(
        self, item: Publication, priority: int, key: str, ttl: float, now: float | None
    ) -> tuple[int, bool]:
        self.transport._check_open()
        at, queue = time.time() if now is None else now, self.queue
        with self._store.lock:
            self._state.reap(queue, at)
            first = self._state.seen(queue, key, at)
            if first is not None:
                return first, True
            message_id = self._store.model(queue).publish(item.group_id, item.text, priority, at)
            self._state.remember(queue, key, message_id, at + ttl)
            return message_id, False

    async def ensure_slots(self, slots: int) -> int:
        with self._store.lock:
            return self._state.slots.setdefault(self.queue, slots)

    async def reset_slots(self) -> bool:
        with self._store.lock:
            if self._store.model(self.queue).groups:
                return False
            return self._state.slots.pop(self.queue, None) is not None

    async def take_key_lock(self, key: str, token: str, ttl: float) -> int | None:
        return self._state.try_lock(key, token, ttl)

    async def release_key_lock(self, key: str, token: str) -> None:
        self._state.unlock(key, token)

    async def purge(self) -> None:
        with self._store.lock:
            self._state.slots.pop(self.queue, None)
            self._state.dedup.pop(self.queue, None)
