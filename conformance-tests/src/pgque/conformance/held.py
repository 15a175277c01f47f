"""A transport wrapper that holds a reply back, to force a worker's races in tests.

:class:`HeldReplies` wraps a blocking transport, :class:`AsyncHeldReplies` an asyncio one: the
first ``settle_and_claim`` that claims runs on the server (its leases are taken), then its
reply is held until :meth:`HeldReplies.let_through` (or for *delay* seconds). Meanwhile the
test brings the worker to the moment it wants (a stop requested, the slots gone, the lease's
time over), so the race is forced, never hoped for. Every other call goes through unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import Any

__all__ = ["HeldReplies", "AsyncHeldReplies", "held_replies"]


class HeldReplies:
    """Wrap a blocking transport; hold the reply of its first claiming ``settle_and_claim``."""

    def __init__(self, inner: Any, delay: float | None = None) -> None:
        self.inner = inner
        self.delay = delay
        #: set once the held call has run on the server (its leases taken)
        self.entered = threading.Event()
        self._go = threading.Event()
        self._held = False
        #: the leases of the held reply
        self.held_leases: list[Any] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def let_through(self) -> None:
        """Let the held reply go to the worker."""
        self._go.set()

    def _hold_this(self, n: int, result: Any) -> bool:
        with self._lock:
            if self._held or n == 0:
                return False
            self._held = True
        self.held_leases = list(result.leases)
        self.entered.set()
        return True

    def _wait(self) -> None:
        if self.delay is not None:
            time.sleep(self.delay)
        elif not self._go.wait(30):
            raise AssertionError("the test never let the held reply through")

    def settle_and_claim(self, settlements: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        result = self.inner.settle_and_claim(settlements, n, *args, **kwargs)
        if self._hold_this(n, result):
            self._wait()
        return result


class AsyncHeldReplies(HeldReplies):
    """The asyncio twin of :class:`HeldReplies` (the wait runs in a thread: the loop runs on)."""

    async def settle_and_claim(self, settlements: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        result = await self.inner.settle_and_claim(settlements, n, *args, **kwargs)
        if self._hold_this(n, result):
            await asyncio.get_running_loop().run_in_executor(None, self._wait)
        return result


def held_replies(inner: Any, delay: float | None = None) -> HeldReplies:
    """Wrap *inner* (blocking or asyncio) in the fitting :class:`HeldReplies`."""
    if inspect.iscoroutinefunction(getattr(inner, "settle_and_claim", None)):
        return AsyncHeldReplies(inner, delay)
    return HeldReplies(inner, delay)
