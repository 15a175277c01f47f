"""The blocking conformance suite on :class:`pgque.sharding.ShardedTransport` over three
PostgreSQL primaries."""

from pgque.conformance.suite_sync import *  # noqa: F403
