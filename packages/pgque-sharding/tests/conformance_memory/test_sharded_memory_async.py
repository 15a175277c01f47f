"""The asyncio conformance suite on :class:`pgque.sharding.AsyncShardedTransport` over
three in-memory shards."""

from pgque.conformance.suite_async import *  # noqa: F403
