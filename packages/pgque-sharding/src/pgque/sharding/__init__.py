"""One logical pgque queue over several transports: the sharded layer (docs/scaling.md).

:class:`AsyncShardedTransport` / :class:`ShardedTransport` spread groups over S shards by
:func:`shard_for` (a stable hash of the group id); each shard is any transport (a
PostgreSQL primary, a sub-queue of a Redis Cluster, an in-memory queue).
:func:`connect_sharded` / :func:`connect_sharded_async` open one shard per URL.
"""

from __future__ import annotations

from pgque.sharding._async import AsyncShardedTransport
from pgque.sharding._connect import connect_sharded, connect_sharded_async
from pgque.sharding._routing import shard_for
from pgque.sharding._sync import ShardedTransport

__all__ = [
    "AsyncShardedTransport",
    "ShardedTransport",
    "shard_for",
    "connect_sharded",
    "connect_sharded_async",
]
