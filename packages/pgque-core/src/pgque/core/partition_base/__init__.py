"""The bones every partition adapter shares: :class:`Grant` and the generic adapter.

pgque.partition asks each transport's *partition adapter* for what its tiers need beyond the
transport contract: an atomic deduplicated publish, the queue's persisted slot count and the
Exclusive tier's per-key lock. A backend ships its adapter beside its transport and registers
it in the entry-point group ``pgque.partition_adapters``, under the name of each transport
class it serves (``pgque.redis.RedisTransport``); the value opens the adapter:
``Adapter(transport, lock_pool=None)``.

:class:`PartitionAdapterBase` / :class:`AsyncPartitionAdapterBase` are the generic adapter
(plain publishes, a ConfigurationError for dedup, slot counts and key locks) and the interface
every adapter has (``pgque.partition.PartitionBackend`` / ``AsyncPartitionBackend`` name
them): pgque.partition uses the generic one for a transport no adapter serves, and a backend's
adapter derives from it, overriding what its store offers.
"""

from __future__ import annotations

from pgque.core.partition_base._async import AsyncPartitionAdapterBase
from pgque.core.partition_base._dedup import DEFAULT_DEDUP_TTL, check_dedup, positive_seconds
from pgque.core.partition_base._grant import Grant
from pgque.core.partition_base._registry import ENTRY_POINT_GROUP, adapter_for, adapter_for_async
from pgque.core.partition_base._sync import PartitionAdapterBase

__all__ = [
    "Grant",
    "PartitionAdapterBase",
    "AsyncPartitionAdapterBase",
    "ENTRY_POINT_GROUP",
    "adapter_for",
    "adapter_for_async",
    "DEFAULT_DEDUP_TTL",
    "check_dedup",
    "positive_seconds",
]
