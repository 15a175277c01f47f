"""pgque.partition: per-key guarantees over any pgque transport (docs/partition.md): the tiers
:class:`Exclusive` (one worker per key) and :class:`Ordered` (FIFO per key), a dedup window,
failure policies, and each transport's adapter (:mod:`pgque.core.partition_base`'s or its own)."""

from __future__ import annotations

from pgque.core.partition_base import AsyncPartitionAdapterBase as AsyncPartitionBackend
from pgque.core.partition_base import Grant
from pgque.core.partition_base import PartitionAdapterBase as PartitionBackend
from pgque.partition._adapters import partition_backend, partition_backend_async
from pgque.partition._async import AsyncKeyedPublisher, AsyncPartitionConsumer
from pgque.partition._consuming import ConsumerCounts, FailurePolicy, KeyContext, policy_options
from pgque.partition._sync import KeyedPublisher, PartitionConsumer
from pgque.partition._tiers import (
    DEFAULT_DEDUP_TTL,
    KEY_HEADER,
    MAX_SLOTS,
    Contention,
    Exclusive,
    Ordered,
    SlotCountMismatch,
    Tier,
    group_for,
)
from pgque.partition.hashing import hashtextextended, slot_for

__all__ = [
    "KeyedPublisher",
    "AsyncKeyedPublisher",
    "PartitionConsumer",
    "AsyncPartitionConsumer",
    "Exclusive",
    "Ordered",
    "Tier",
    "FailurePolicy",
    "Contention",
    "KeyContext",
    "ConsumerCounts",
    "SlotCountMismatch",
    "policy_options",
    "group_for",
    "hashtextextended",
    "slot_for",
    "KEY_HEADER",
    "MAX_SLOTS",
    "DEFAULT_DEDUP_TTL",
    "PartitionBackend",
    "AsyncPartitionBackend",
    "partition_backend",
    "partition_backend_async",
    "Grant",
]
