"""The blocking conformance suite on :class:`pgque.core.InMemoryTransport`."""

from pgque.conformance.suite_sync import *  # noqa: F403
