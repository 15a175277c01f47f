"""A worker over three PostgreSQL primaries with one shard's connection cut
(pgque.conformance.sharded_worker)."""

from pgque.conformance.sharded_worker import *  # noqa: F403
