"""SIGINT and SIGTERM as stop requests: the first graceful, the next ones not
(:class:`SignalCounter`), routed to a worker by :func:`watch_signals`."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from pgque.core.worker._logs import log

__all__ = ["SignalCounter", "STOP_SIGNALS", "watch_signals"]


class SignalCounter:
    """Turn SIGINT/SIGTERM into stop requests: the first is graceful, any later one is not
    (the second stops at once, waiting only for handlers in threads, which cannot be stopped;
    the third leaves those running)."""

    def __init__(self, stop: Callable[[bool], None]) -> None:
        self._stop = stop
        self._lock = threading.Lock()
        self.received = 0

    def __call__(self, signum: int) -> None:
        """Handle signal *signum*."""
        with self._lock:
            self.received += 1
            received = self.received
        name = signal.Signals(signum).name
        if received == 1:
            log.warning("received %s: finishing in-flight messages (again to stop at once)", name)
        elif received == 2:
            log.warning(
                "received %s again: stopping at once (handlers running in threads cannot be "
                "stopped and are waited for; again to leave them running)",
                name,
            )
        else:
            log.warning("received %s again: leaving handlers that still run behind", name)
        self._stop(received == 1)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def watch_signals(on_signal: Callable[[int], None], loop: Any = None) -> Callable[[], None]:
    """Route SIGINT and SIGTERM to *on_signal*; return a function that undoes it.

    With an asyncio *loop*, *on_signal* runs in that loop; without, in a new thread: the
    interrupted main thread may hold locks that stopping a worker takes. Only the main thread
    may set signal handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        log.debug("not the main thread: signal handlers not installed")
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    if loop is not None:
        try:
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, on_signal, int(sig))
        except (NotImplementedError, RuntimeError):  # no loop signal support (Windows)
            return watch_signals(lambda s: loop.call_soon_threadsafe(on_signal, s))

        def undo_loop() -> None:
            for sig, old in previous.items():
                loop.remove_signal_handler(sig)
                if old is not None:
                    signal.signal(sig, old)

        return undo_loop

    def handler(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=on_signal, args=(signum,), name="pgque-signal").start()

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)

    def undo() -> None:
        for sig, old in previous.items():
            if old is not None:
                signal.signal(sig, old)

    return undo
