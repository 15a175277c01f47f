"""Transport wrappers that fail a worker's settling calls on purpose, to force its ambiguous
cases in tests (used by pgque.conformance.worker_stops and the worker's own tests).

- :func:`cut_settlements`: the first *cuts* ``settle_and_claim`` calls that settle something
  raise ``ConnectionLost`` before doing anything, as a cut connection does (wrap one shard of
  a sharded transport: the other shards' settlements in the same call take effect).
- :func:`lost_settle_reply`: the first ``settle_and_claim`` that settles something runs on the
  server, then its reply is lost (``ConnectionLost(maybe_applied=True)``), as a cut after the
  server ran it.

Each returns the blocking or asyncio wrapper that fits the transport; every other call goes
through unchanged.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

from pgque.core import ConnectionLost

__all__ = ["CutSettlements", "LostSettleReply", "cut_settlements", "lost_settle_reply"]


class _Wrapper:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CutSettlements(_Wrapper):
    """Fail the first *cuts* settling calls before they reach the server (blocking)."""

    def __init__(self, inner: Any, cuts: int) -> None:
        super().__init__(inner)
        #: how many settling calls are still to be cut
        self.cuts = cuts

    def _cut(self, settlements: Any) -> bool:
        with self.lock:
            if settlements and self.cuts > 0:
                self.cuts -= 1
                return True
            return False

    def settle_and_claim(self, settlements: Any, *args: Any, **kwargs: Any) -> Any:
        if self._cut(settlements):
            raise ConnectionLost("cut (test)")
        return self.inner.settle_and_claim(settlements, *args, **kwargs)


class AsyncCutSettlements(CutSettlements):
    """The asyncio twin of :class:`CutSettlements`."""

    async def settle_and_claim(self, settlements: Any, *args: Any, **kwargs: Any) -> Any:
        if self._cut(settlements):
            raise ConnectionLost("cut (test)")
        return await self.inner.settle_and_claim(settlements, *args, **kwargs)


class LostSettleReply(_Wrapper):
    """Lose the reply of the first settling call, after the server ran it (blocking)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        #: True once a reply was lost
        self.lost = False

    def _lose(self, settlements: Any) -> bool:
        with self.lock:
            if settlements and not self.lost:
                self.lost = True
                return True
            return False

    def settle_and_claim(self, settlements: Any, *args: Any, **kwargs: Any) -> Any:
        result = self.inner.settle_and_claim(settlements, *args, **kwargs)
        if self._lose(settlements):
            raise ConnectionLost("reply lost (test)", maybe_applied=True)
        return result


class AsyncLostSettleReply(LostSettleReply):
    """The asyncio twin of :class:`LostSettleReply`."""

    async def settle_and_claim(self, settlements: Any, *args: Any, **kwargs: Any) -> Any:
        result = await self.inner.settle_and_claim(settlements, *args, **kwargs)
        if self._lose(settlements):
            raise ConnectionLost("reply lost (test)", maybe_applied=True)
        return result


def _is_async(inner: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(inner, "settle_and_claim", None))


def cut_settlements(inner: Any, cuts: int) -> CutSettlements:
    """Wrap *inner* (blocking or asyncio) in the fitting :class:`CutSettlements`."""
    return AsyncCutSettlements(inner, cuts) if _is_async(inner) else CutSettlements(inner, cuts)


def lost_settle_reply(inner: Any) -> LostSettleReply:
    """Wrap *inner* (blocking or asyncio) in the fitting :class:`LostSettleReply`."""
    return AsyncLostSettleReply(inner) if _is_async(inner) else LostSettleReply(inner)
