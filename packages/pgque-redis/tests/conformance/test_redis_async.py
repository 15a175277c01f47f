"""The asyncio conformance suite on :class:`pgque.redis.AsyncRedisTransport`."""

from pgque.conformance.suite_async import *  # noqa: F403
