"""The asyncio conformance suite on :class:`pgque.core.AsyncInMemoryTransport`."""

from pgque.conformance.suite_async import *  # noqa: F403
