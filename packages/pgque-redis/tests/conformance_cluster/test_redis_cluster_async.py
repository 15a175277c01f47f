"""The asyncio conformance suite on :class:`pgque.redis.AsyncRedisTransport` over a Redis
Cluster."""

from pgque.conformance.suite_async import *  # noqa: F403
