"""pgque.partition: per-key guarantees over any pgque transport.

- :class:`Exclusive` (Tier A): at most one worker per key at a time, order not promised;
  a held key's duplicate is dropped (idempotent handlers) or deferred.
- :class:`Ordered` (Tier B): FIFO per key, one processor per key; one group per key
  (``slots=None``) or N hash-routed slots, N persisted per queue.
- A producer dedup window: ``send(..., dedup_key=, dedup_ttl=)`` appends nothing for a repeat
  within the window, atomically with the append.
- Failure policies ``skip`` (dead-letter and move on) and ``pause`` (hold the key until the
  failed event is released), see :func:`policy_options`.
- :func:`hashtextextended` and :func:`slot_for`: PostgreSQL's key hashing in Python, so every
  backend routes a key to the same slot.
- :class:`PartitionBackend` / :class:`AsyncPartitionBackend`: the protocol of the per-backend
  adapters (dedup, slot counts, key locks), which each backend ships and registers in the
  entry-point group ``pgque.partition_adapters``; :func:`partition_backend` /
  :func:`partition_backend_async` find a transport's.

See docs/partition.md for choosing a tier.
"""

from __future__ import annotations

from pgque.core.partition_base import Grant
from pgque.partition._async import AsyncKeyedPublisher, AsyncPartitionConsumer
from pgque.partition._backends_async import AsyncPartitionBackend
from pgque.partition._backends_async import partition_backend as partition_backend_async
from pgque.partition._backends_sync import PartitionBackend, partition_backend
from pgque.partition._common import (
    DEFAULT_DEDUP_TTL,
    KEY_HEADER,
    MAX_SLOTS,
    ConsumerCounts,
    Contention,
    Exclusive,
    FailurePolicy,
    KeyContext,
    Ordered,
    SlotCountMismatch,
    Tier,
    group_for,
    policy_options,
)
from pgque.partition._sync import KeyedPublisher, PartitionConsumer
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
