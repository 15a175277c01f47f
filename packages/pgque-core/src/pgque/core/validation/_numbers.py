"""Checks of numbers: priorities, durations in seconds, schedule ticks and batch sizes."""

from __future__ import annotations

import math

from pgque.core.errors import InvalidInput
from pgque.core.validation._limits import MAX_BATCH, MAX_PRIORITY, MAX_VISIBILITY_S

__all__ = [
    "check_priority",
    "check_seconds",
    "check_delay",
    "check_tick",
    "check_batch_size",
    "check_claim_count",
]


def check_priority(priority: object, name: str = "priority") -> int:
    """Return *priority* if it is an int from 0 to 4 (bool is refused)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidInput(f"{name} must be an int from 0 to 4, not {priority!r}")
    if not 0 <= priority <= MAX_PRIORITY:
        raise InvalidInput(f"{name} must be from 0 to 4, not {priority}")
    return priority


def check_seconds(value: object, name: str) -> float:
    """Return *value* as float if it is a finite number from 0 to one year."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number of seconds, not {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidInput(f"{name} must be finite and >= 0, not {value!r}")
    if seconds > MAX_VISIBILITY_S:
        raise InvalidInput(f"{name} must be at most one year, not {value!r}")
    return seconds


def check_delay(value: object) -> float:
    """Return a publish's *delay* as float: a finite number of seconds from 0 to one year."""
    return check_seconds(value, "delay")


def check_tick(tick: object) -> float:
    """Return a schedule tick (epoch seconds) as float: finite and >= 0."""
    if isinstance(tick, bool) or not isinstance(tick, (int, float)):
        raise InvalidInput(f"tick must be epoch seconds (a number), not {tick!r}")
    value = float(tick)
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(f"tick must be finite and >= 0, not {tick!r}")
    return value


def check_batch_size(n: object) -> int:
    """Return *n* if it is an int from 1 to 10,000."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidInput(f"n must be an int, not {n!r}")
    if not 1 <= n <= MAX_BATCH:
        raise InvalidInput(f"n must be from 1 to {MAX_BATCH}, not {n}")
    return n


def check_claim_count(n: object) -> int:
    """Return *n* if it is an int from 0 to 10,000 (``settle_and_claim``: 0 settles only)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidInput(f"n must be an int, not {n!r}")
    if not 0 <= n <= MAX_BATCH:
        raise InvalidInput(f"n must be from 0 to {MAX_BATCH}, not {n}")
    return n
