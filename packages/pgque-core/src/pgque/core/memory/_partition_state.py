"""The partition adapter's state for in-memory transports, kept beside each MemoryStore.

One :class:`MemoryPartitionState` per store (so every transport on the store sees it, as every
worker sees one database): dedup windows (checked and appended under the store's lock, so a
dedup publish is atomic like on the servers), slot counts, and the fenced per-key locks of the
Exclusive tier.
"""

from __future__ import annotations

import heapq
import threading
import time
import weakref
from dataclasses import dataclass, field

from pgque.core.memory._store import MemoryStore

__all__ = ["MemoryPartitionState", "state_of", "REAP_BATCH"]

#: Expired dedup keys removed per deduplicated publish, at most.
REAP_BATCH = 16


@dataclass
class _Lock:
    token: str
    epoch: int
    expires: float


@dataclass
class _QueueDedup:
    keys: dict[str, tuple[int, float]] = field(default_factory=dict)
    expiries: list[tuple[float, str]] = field(default_factory=list)


class MemoryPartitionState:
    """Dedup windows, slot counts and key locks of one :class:`MemoryStore`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.slots: dict[str, int] = {}
        self.dedup: dict[str, _QueueDedup] = {}
        self._locks: dict[str, _Lock] = {}
        self._epoch = 0

    def reap(self, queue: str, now: float, limit: int = REAP_BATCH) -> int:
        """Drop up to *limit* expired dedup keys of *queue* (call under the store's lock)."""
        table = self.dedup.get(queue)
        if table is None:
            return 0
        reaped = 0
        while table.expiries and table.expiries[0][0] <= now and reaped < limit:
            expires, key = heapq.heappop(table.expiries)
            entry = table.keys.get(key)
            if entry is not None and entry[1] == expires:
                del table.keys[key]
                reaped += 1
        return reaped

    def remember(self, queue: str, key: str, message_id: int, expires: float) -> None:
        """Record that *key* published *message_id* until *expires* (under the store's lock)."""
        table = self.dedup.setdefault(queue, _QueueDedup())
        table.keys[key] = (message_id, expires)
        heapq.heappush(table.expiries, (expires, key))

    def seen(self, queue: str, key: str, now: float) -> int | None:
        """Return the message id *key* published within its window, else None."""
        table = self.dedup.get(queue)
        entry = None if table is None else table.keys.get(key)
        if entry is None or entry[1] <= now:
            return None
        return entry[0]

    def try_lock(self, key: str, token: str, ttl: float) -> int | None:
        """Take *key*'s lock for *ttl* seconds under *token*: its epoch, or None while another
        holds it."""
        now = time.monotonic()
        with self._lock:
            held = self._locks.get(key)
            if held is not None and held.expires > now:
                return None
            self._epoch += 1
            self._locks[key] = _Lock(token, self._epoch, now + ttl)
            return self._epoch

    def unlock(self, key: str, token: str) -> bool:
        """Release *key*'s lock if *token* still holds it."""
        with self._lock:
            held = self._locks.get(key)
            if held is None or held.token != token:
                return False
            del self._locks[key]
            return True


_states: weakref.WeakKeyDictionary[MemoryStore, MemoryPartitionState] = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()


def state_of(store: MemoryStore) -> MemoryPartitionState:
    """Return the partition state of *store*, creating it on first use."""
    with _states_lock:
        state = _states.get(store)
        if state is None:
            state = _states[store] = MemoryPartitionState()
        return state
