"""Run the conformance suite over the sharded layer: factories of sharded transports.

A backend's test setup wraps one transport factory per shard::

    @pytest.fixture
    def transport_factory(memory_factory):
        return sharded_factory([memory_factory] * 3)

Each sharded transport gets a fresh logical queue name (unless ``queue=`` is given, for a
second worker on the same queue); shard *k* opens sub-queue ``<queue>_s<k>`` with the same
options (``clock``, ``max_attempts``, ...). The shards' own factories close what they opened.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pgque.conformance._types import AsyncTransportFactory, TransportFactory
from pgque.core import AsyncTransport, Transport
from pgque.sharding import AsyncShardedTransport, ShardedTransport

__all__ = ["sharded_factory", "sharded_async_factory", "sub_queue"]


def sub_queue(queue: str, shard: int) -> str:
    """The name shard *shard* of the logical queue *queue* uses."""
    return f"{queue}_s{shard}"


def _fresh_queue() -> str:
    return f"q_{uuid.uuid4().hex[:16]}"


def sharded_factory(factories: Sequence[TransportFactory]) -> TransportFactory:
    """Return ``make(**options)`` opening a :class:`ShardedTransport` over one transport of
    each factory (shard *k* from ``factories[k]``)."""
    shards = list(factories)

    def make(**options: Any) -> Transport:
        queue = options.pop("queue", None) or _fresh_queue()
        opened = [f(queue=sub_queue(queue, k), **options) for k, f in enumerate(shards)]
        return ShardedTransport(opened, queue=queue)

    return make


def sharded_async_factory(factories: Sequence[AsyncTransportFactory]) -> AsyncTransportFactory:
    """Return ``await amake(**options)`` opening an :class:`AsyncShardedTransport` over one
    transport of each factory (shard *k* from ``factories[k]``)."""
    shards = list(factories)

    async def amake(**options: Any) -> AsyncTransport:
        queue = options.pop("queue", None) or _fresh_queue()
        opened = [await f(queue=sub_queue(queue, k), **options) for k, f in enumerate(shards)]
        return AsyncShardedTransport(opened, queue=queue)

    return amake
