"""The blocking conformance suite on :class:`pgque.postgres.PostgresTransport`."""

from pgque.conformance.suite_sync import *  # noqa: F403
