"""The blocking conformance suite on :class:`pgque.sharding.ShardedTransport` over three
in-memory shards."""

from pgque.conformance.suite_sync import *  # noqa: F403
