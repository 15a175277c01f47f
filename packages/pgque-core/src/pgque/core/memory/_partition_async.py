"""The in-memory transport's partition adapter (asyncio API): pgque.partition's dedup window,
persisted slot count and key lock, each one critical section under the store's lock.

Registered in ``pgque.partition_adapters`` for :class:`~pgque.core.memory.AsyncInMemoryTransport`.
"""

# The source of its blocking twin, _partition_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pgque.core.memory._async import AsyncInMemoryTransport
from pgque.core.memory._partition_state import MemoryPartitionState, state_of
from pgque.core.models import Event
from pgque.core.partition_base import AsyncPartitionAdapterBase, Grant
from pgque.core.validation import check_event, check_group_id, check_priority

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

    async def publish(
        self, group_id: str, event: Event, priority: int, dedup: tuple[str, float] | None
    ) -> tuple[int, bool]:
        if dedup is None:
            return await super().publish(group_id, event, priority, None)
        self.transport._check_open()
        group_id = check_group_id(group_id)
        priority = check_priority(priority)
        text = check_event(event)
        key, ttl = dedup
        queue = self.queue
        with self._store.lock:
            now = self.transport._store_now()
            self._state.reap(queue, now)
            first = self._state.seen(queue, key, now)
            if first is not None:
                return first, True
            message_id = self._store.model(queue).publish(group_id, text, priority, now)
            self._state.remember(queue, key, message_id, now + ttl)
            return message_id, False

    async def ensure_slots(self, slots: int) -> int:
        with self._store.lock:
            return self._state.slots.setdefault(self.queue, slots)

    async def reset_slots(self) -> bool:
        with self._store.lock:
            if self._store.model(self.queue).groups:
                return False
            return self._state.slots.pop(self.queue, None) is not None

    @asynccontextmanager
    async def key_lock(self, key: str, ttl: float) -> AsyncIterator[Grant | None]:
        taken = self._state.try_lock(key, ttl)
        if taken is None:
            yield None
            return
        token, epoch = taken
        try:
            yield Grant(epoch=epoch)
        finally:
            self._state.unlock(key, token)

    async def purge(self) -> None:
        with self._store.lock:
            self._state.slots.pop(self.queue, None)
            self._state.dedup.pop(self.queue, None)
