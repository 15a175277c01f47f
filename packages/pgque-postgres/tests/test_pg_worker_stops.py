"""A worker's stop at a forced moment, on PostgreSQL (pgque.conformance.worker_stops)."""

from pgque.conformance.worker_stops import *  # noqa: F403
