"""Find and open a transport's partition adapter (the lookup is pgque.core.partition_base's,
shared with the tasks' dedup window)."""

from __future__ import annotations

from typing import Any

from pgque.core.contract import AsyncTransport, Transport
from pgque.core.partition_base import (
    AsyncPartitionAdapterBase,
    PartitionAdapterBase,
    adapter_for,
    adapter_for_async,
)

__all__ = ["partition_backend", "partition_backend_async"]


def partition_backend(transport: Transport, *, lock_pool: Any = None) -> PartitionAdapterBase:
    """Return *transport*'s partition adapter: its backend's, else the generic one (plain
    publishes only). *lock_pool*: a psycopg pool for PostgreSQL's key locks (default: the
    transport's own). Raises InvalidInput for an asyncio transport that has an adapter,
    ConfigurationError when a registered adapter fails to load or is none."""
    return adapter_for(transport, lock_pool=lock_pool)


def partition_backend_async(
    transport: AsyncTransport, *, lock_pool: Any = None
) -> AsyncPartitionAdapterBase:
    """Return the asyncio *transport*'s partition adapter, as :func:`partition_backend`."""
    return adapter_for_async(transport, lock_pool=lock_pool)
