"""Open a sharded transport from a list of URLs: one shard per URL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgque.core.contract import Transport
from pgque.core.errors import ConfigurationError
from pgque.core.registry import connect, connect_async
from pgque.sharding._async import AsyncShardedTransport
from pgque.sharding._sync import ShardedTransport

__all__ = ["connect_sharded", "connect_sharded_async"]


def _urls(urls: object) -> list[str]:
    if isinstance(urls, (str, bytes)) or not isinstance(urls, Sequence):
        raise ConfigurationError("urls must be a list of queue URLs, one per shard")
    found = list(urls)
    if not found or not all(isinstance(u, str) for u in found):
        raise ConfigurationError("urls must be a non-empty list of queue URLs (str)")
    if len(set(found)) != len(found):
        raise ConfigurationError("a URL is given twice: each shard needs a queue of its own")
    return found


def connect_sharded(
    urls: Sequence[str], *, name: str | None = None, **options: Any
) -> ShardedTransport:
    """Open one blocking transport per URL (``connect(url, **options)``) as one sharded queue.

    *options* go to every shard alike, so a pool size is per shard: S shards with
    ``pool_max_size=P`` hold up to S x P connections (plus each shard's listener). A shard's
    own options go in its URL (``?queue=orders_a``). *name* is the logical queue name
    (default: the first shard's queue). The order of *urls* is the shard order and must never
    change while the queue holds messages (docs/scaling.md). Raises ConfigurationError for
    a bad list or what ``connect`` raises; shards opened before a failure are closed.
    """
    opened: list[Transport] = []
    try:
        for url in _urls(urls):
            opened.append(connect(url, **options))
        return ShardedTransport(opened, queue=name)
    except BaseException:
        for transport in opened:
            transport.close()
        raise


def connect_sharded_async(
    urls: Sequence[str], *, name: str | None = None, **options: Any
) -> AsyncShardedTransport:
    """Return an asyncio sharded transport, one shard per URL (``connect_async``).

    Each shard connects on first use. Same options, budget and errors as
    :func:`connect_sharded`.
    """
    return AsyncShardedTransport([connect_async(url, **options) for url in _urls(urls)], queue=name)
