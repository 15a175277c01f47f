"""In-memory transports: the executable reference of the contract and a test double.

``memory://`` gives a fresh private store; ``memory://NAME`` a process-wide store shared by
every transport opened with that name (as workers share a database). The partition adapters
(:class:`MemoryPartitionAdapter`, :class:`AsyncMemoryPartitionAdapter`) are what
pgque.partition uses on them (entry-point group ``pgque.partition_adapters``).
"""

from __future__ import annotations

from typing import Any

from pgque.core.memory._async import AsyncInMemoryTransport
from pgque.core.memory._partition_async import AsyncMemoryPartitionAdapter
from pgque.core.memory._partition_state import MemoryPartitionState
from pgque.core.memory._partition_sync import MemoryPartitionAdapter
from pgque.core.memory._store import MemoryStore, named_store
from pgque.core.memory._sync import InMemoryTransport
from pgque.core.registry import Backend
from pgque.core.urls import parse_url

__all__ = [
    "AsyncInMemoryTransport",
    "InMemoryTransport",
    "MemoryStore",
    "MemoryBackend",
    "MemoryPartitionAdapter",
    "AsyncMemoryPartitionAdapter",
    "MemoryPartitionState",
]


def _store_for(url: str) -> MemoryStore:
    name = parse_url(url).netloc_and_path
    return named_store(name) if name else MemoryStore()


def _open(url: str, **options: Any) -> InMemoryTransport:
    return InMemoryTransport(store=_store_for(url), **options)


def _open_async(url: str, **options: Any) -> AsyncInMemoryTransport:
    return AsyncInMemoryTransport(store=_store_for(url), **options)


MemoryBackend = Backend(package="pgque-core", open=_open, open_async=_open_async)
