"""The waiting side of a transport's wake-ups (asyncio API), shared by the transports."""

# The source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio  # async-only
import time
from collections.abc import Awaitable, Callable

# sync: import threading

__all__ = ["AsyncWakeupWaiter"]


class AsyncWakeupWaiter:
    """Serve ``wait_for_messages`` from one listener, however many callers wait at once.

    A transport has one listener (a LISTEN connection, a pub/sub subscription) and gives the
    waiter five callables over it:

    - ``listening()``: whether the listener is open;
    - ``listen()``: open it, returning False when it cannot be opened (waits then only sleep:
      polling is the fallback);
    - ``heard(timeout)``: wait up to *timeout* seconds for one notification, True if one came;
    - ``drain()``: discard the notifications queued meanwhile (they are folded into one wake);
    - ``reset()``: drop the listener after it failed, so the next wait opens a new one.

    One caller reads the listener at a time, under a lock; a caller that queued behind another
    returns True as soon as that one heard something (a wake counter tells it). The first wait
    returns True as soon as it listens, since a publish just before it was not heard. A
    listener that fails (or whose opening is cancelled half-way) is reset, and the error
    propagates for the transport to translate.
    """

    def __init__(
        self,
        *,
        listening: Callable[[], bool],
        listen: Callable[[], Awaitable[bool]],
        heard: Callable[[float], Awaitable[bool]],
        drain: Callable[[], Awaitable[None]],
        reset: Callable[[], Awaitable[None]],
    ) -> None:
        self._listening = listening
        self._listen = listen
        self._heard = heard
        self._drain = drain
        self._reset = reset
        self._lock = asyncio.Lock()
        self._wakes = 0

    @property
    def wakes(self) -> int:
        """How many wake-ups this waiter has reported (every True but a queued caller's)."""
        return self._wakes

    async def wait(self, timeout: float, due: float | None = None) -> bool:
        """Wait up to *timeout* seconds (a checked float) for news; True if some came.

        A True may be spurious (the caller claims and finds nothing); False means the time
        passed. *due* (seconds, a :meth:`DueWait.cap <pgque.core.wakeups.DueWait.cap>`) ends
        the wait sooner with True: a scheduled message falls due then. Raises what the
        listener's callables raise.
        """
        if due is not None and due < timeout:
            await self.wait(due)
            return True
        deadline = time.monotonic() + timeout
        seen = self._wakes
        if not await self._take_lock(timeout):
            return self._wakes != seen
        try:
            if self._wakes != seen:
                return True  # another caller heard a notification while we queued
            if not self._listening():
                try:
                    opened = await self._listen()
                except BaseException:
                    # Never keep a half-opened listener: every later wait would sleep its
                    # whole timeout without hearing anything.
                    await self._reset()
                    raise
                if not opened:
                    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
                    return False
                self._wakes += 1
                return True
            try:
                if not await self._heard(max(0.0, deadline - time.monotonic())):
                    return False
                await self._drain()
            except Exception:
                await self._reset()
                raise
            self._wakes += 1
            return True
        finally:
            self._lock.release()

    async def _take_lock(self, timeout: float) -> bool:
        try:  # async-only
            await asyncio.wait_for(self._lock.acquire(), timeout)  # async-only
        except asyncio.TimeoutError:  # async-only
            return False  # async-only
        return True  # async-only
        # sync: return self._lock.acquire(timeout=timeout)
