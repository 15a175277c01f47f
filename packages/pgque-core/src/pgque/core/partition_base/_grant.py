"""A held key lock, as every partition adapter (both flavours) hands it out: :class:`Grant`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Grant"]


@dataclass(frozen=True)
class Grant:
    """A held key lock: its fencing epoch (Redis, memory) or its transaction's connection."""

    epoch: int | None = None
    connection: Any = None
