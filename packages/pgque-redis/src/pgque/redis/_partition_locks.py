"""The partition adapters' key locks: the key of a partition key's lock, and a lock's TTL as
the whole milliseconds of ``PX``. (Their scripts are ``lua/partition/*.lua``, see _scripts.)"""

from __future__ import annotations

import math

__all__ = ["LOCK_PREFIX", "millis"]

#: The key of a partition key's lock is this prefix and the key.
LOCK_PREFIX = "pgque:lock:"


def millis(seconds: float) -> int:
    """Return *seconds* in whole milliseconds, rounded up, at least 1 (a ``PX`` argument)."""
    return max(1, math.ceil(seconds * 1000))
