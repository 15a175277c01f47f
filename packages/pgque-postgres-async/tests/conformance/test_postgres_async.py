"""The asyncio conformance suite on :class:`pgque.postgres_async.AsyncPostgresTransport`."""

from pgque.conformance.suite_async import *  # noqa: F403
