"""Periodic messages: a :class:`Schedule` of cron entries, published tick by tick by a
:class:`Scheduler` (threads) or :class:`AsyncScheduler` (asyncio), exactly once across several
schedulers on one queue. See docs/scheduling.md.
"""

from __future__ import annotations

from pgque.core.scheduling._async import AsyncScheduler
from pgque.core.scheduling._entry import (
    ENTRY_HEADER,
    TICK_HEADER,
    MissedTicks,
    Schedule,
    ScheduleEntry,
)
from pgque.core.scheduling._options import DEFAULT_GRACE_S
from pgque.core.scheduling._sync import Scheduler
from pgque.core.scheduling._ticks import PublishedTick

__all__ = [
    "Schedule",
    "ScheduleEntry",
    "MissedTicks",
    "Scheduler",
    "AsyncScheduler",
    "PublishedTick",
    "TICK_HEADER",
    "ENTRY_HEADER",
    "DEFAULT_GRACE_S",
]
