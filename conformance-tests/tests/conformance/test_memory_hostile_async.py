"""The hostile-input catalogue on the asyncio in-memory transport."""

from pgque.conformance.hostile_async import *  # noqa: F403
