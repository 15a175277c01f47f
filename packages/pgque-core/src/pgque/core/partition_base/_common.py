"""What both flavours of the partition adapters share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Grant", "ENTRY_POINT_GROUP"]

#: The entry-point group of the partition adapters: name = a transport class
#: (``pgque.redis.RedisTransport``), value = the adapter class serving it.
ENTRY_POINT_GROUP = "pgque.partition_adapters"


@dataclass(frozen=True)
class Grant:
    """A held key lock: its fencing epoch (Redis, memory) or its transaction's connection."""

    epoch: int | None = None
    connection: Any = None
