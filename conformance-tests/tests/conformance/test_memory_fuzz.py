"""The hostile-input fuzz on the in-memory transport: the program runner over every operation."""

from __future__ import annotations

from pgque.conformance.fuzz import *  # noqa: F403
