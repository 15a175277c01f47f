"""What both Redis partition adapters share: their Lua scripts, the lock keys, TTL rounding.

The scripts are this package's ``lua/partition_*.lua`` files. A deduplicated publish runs
``common.lua`` first, so it is the very same append as a plain one.
"""

from __future__ import annotations

import hashlib
import math
from functools import cache
from importlib.resources import files

from pgque.redis._scripts import Script

__all__ = ["LOCK_PREFIX", "partition_script", "millis"]

#: The key of a partition key's lock is this prefix and the key.
LOCK_PREFIX = "pgque:lock:"


def _read(name: str) -> str:
    return (files("pgque.redis") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


@cache
def partition_script(name: str, *, with_common: bool = False) -> Script:
    """Return ``lua/partition_<name>.lua``, after ``common.lua`` if *with_common*."""
    text = _read(f"partition_{name}")
    if with_common:
        text = f"{_read('common')}\n{text}"
    sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
    return Script(name, text, sha)


def millis(seconds: float) -> int:
    """Return *seconds* in whole milliseconds, rounded up, at least 1 (a ``PX`` argument)."""
    return max(1, math.ceil(seconds * 1000))
