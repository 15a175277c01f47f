"""A clock tests can move by hand, for transports that declare ``injected_clock``."""

from __future__ import annotations

import threading

__all__ = ["FakeClock"]


class FakeClock:
    """Epoch seconds that change only when :meth:`advance` is called (thread-safe)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by *seconds*; return the new time."""
        with self._lock:
            self._now += seconds
            return self._now
