"""The hostile-input catalogue on the blocking in-memory transport."""

from pgque.conformance.hostile_sync import *  # noqa: F403
