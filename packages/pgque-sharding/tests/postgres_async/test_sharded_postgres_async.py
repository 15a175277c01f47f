"""The asyncio conformance suite on :class:`pgque.sharding.AsyncShardedTransport` over
three PostgreSQL primaries."""

from pgque.conformance.suite_async import *  # noqa: F403
