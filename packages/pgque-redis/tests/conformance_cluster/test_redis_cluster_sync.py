"""The blocking conformance suite on :class:`pgque.redis.RedisTransport` over a Redis Cluster."""

from pgque.conformance.suite_sync import *  # noqa: F403
