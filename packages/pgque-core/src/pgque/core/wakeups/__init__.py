"""Wake-ups for idle workers: the waiting side every transport with ``wait_for_messages`` shares.

A backend keeps its listener (PostgreSQL's LISTEN connection, Redis's pub/sub subscription)
and hands :class:`WakeupWaiter` / :class:`AsyncWakeupWaiter` the callables over it; the waiter
owns the rest: one reader at a time, the wake counter that releases queued callers, the first
call's True and folding queued notifications into one wake-up. :class:`DueWait` ends a wait
early when the queue's next scheduled message falls due (no listener announces that).
"""

from __future__ import annotations

from pgque.core.wakeups._async import AsyncWakeupWaiter
from pgque.core.wakeups._due import DueWait
from pgque.core.wakeups._sync import WakeupWaiter

__all__ = ["AsyncWakeupWaiter", "DueWait", "WakeupWaiter"]
