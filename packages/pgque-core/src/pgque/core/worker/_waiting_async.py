"""How the worker's parts wait: on a future, an event or a pause that a stop cuts short.

The asyncio source of its blocking twin, _waiting_sync.py, which waits on  # async-only
concurrent.futures and threading instead.  # async-only
"""

from __future__ import annotations

import asyncio  # async-only

# sync: import concurrent.futures
import contextlib  # async-only

# sync: import threading

__all__ = ["resolve", "first", "wait_event", "pause"]


def resolve(future: asyncio.Future[None]) -> None:
    """Mark *future* done (if it is not yet)."""
    if not future.done():
        future.set_result(None)


async def first(future: asyncio.Future[None], other: asyncio.Future[None]) -> None:
    """Wait until *future* or *other* is done."""
    if not future.done():
        await asyncio.wait({future, other}, return_when=asyncio.FIRST_COMPLETED)


async def wait_event(event: asyncio.Event, timeout: float | None) -> None:
    """Wait until *event* is set, or *timeout* seconds (None: no limit)."""
    with contextlib.suppress(asyncio.TimeoutError):  # async-only
        await asyncio.wait_for(event.wait(), timeout)  # async-only
    # sync: event.wait(timeout)


async def pause(until: asyncio.Future[None], seconds: float) -> None:
    """Sleep *seconds*, waking early when *until* is done."""
    if seconds > 0 and not until.done():
        await asyncio.wait({until}, timeout=seconds)
