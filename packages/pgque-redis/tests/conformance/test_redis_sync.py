"""The blocking conformance suite on :class:`pgque.redis.RedisTransport`."""

from pgque.conformance.suite_sync import *  # noqa: F403
