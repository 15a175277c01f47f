"""What a scheduler logs (logger ``pgque.scheduler``): tick times in ISO 8601, and the line
for ticks an entry missed, at the level its policy deserves."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from pgque.core.scheduling._entry import ScheduleEntry

__all__ = ["log", "stamp", "log_missed"]

log = logging.getLogger("pgque.scheduler")


def stamp(tick: float) -> str:
    """Return *tick* as ISO 8601 in UTC, for logs."""
    return datetime.fromtimestamp(tick, timezone.utc).isoformat().replace("+00:00", "Z")


def log_missed(scheduler: str, entry: ScheduleEntry, cursor: float) -> None:
    """Log that *entry* missed ticks after *cursor* and what its policy does with them."""
    # Skipping is the policy at work; catch_up leaving ticks out is worth a WARNING.
    skip = entry.missed == "skip"
    log.log(
        logging.INFO if skip else logging.WARNING,
        "scheduler %s: entry %s missed ticks after %s; %s",
        scheduler,
        entry.name,
        stamp(cursor),
        "skipped all but the latest"
        if skip
        else f"publishing the latest {entry.max_catch_up} (max_catch_up)",
    )
