"""Whether a worker reaches its server (:class:`Reachability`): one WARNING when it loses it,
one when it is back, whatever fails in between at DEBUG."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

from pgque.core.worker._logs import failure_reason, log

__all__ = ["Reachability", "WAKEUP_TEXTS", "STALE_AFTER_BACK_S"]

_WHITESPACE = re.compile(r"\s+")


#: How long after the connection came back a failure is taken for a connection that went
#: stale during the outage (a pooled or listening connection used for the first time since):
#: logged at DEBUG, unless failures go on past it (then it is a new outage, and said so).
STALE_AFTER_BACK_S = 10.0


_LOST_TEXT = "lost the connection to the server (%s failed: %s); retrying every <=%g s"
_BACK_TEXT = "connection back after %.1f s, %d calls failed meanwhile"
#: The texts of the wake-up listener's tracker (its connection may be another: listen_url).
WAKEUP_TEXTS = (
    "wake-ups failed (%s failed: %s); polling instead, retrying every <=%g s",
    "wake-ups work again after %.1f s, %d waits failed meanwhile",
)


class Reachability:
    """Whether a worker reaches its server: one log line when it loses it, one when it is back.

    Every failed call on a lost connection goes to :meth:`lost`, every call that got an
    answer to :meth:`reached`; only the changes of state are logged at WARNING (the calls
    that fail in between at DEBUG). *retry_max* is the longest wait between two attempts
    (the worker's ``reconnect_backoff`` maximum). Thread-safe; :meth:`reached` is cheap
    while the server is reachable (it runs after every call).
    """

    def __init__(
        self,
        name: str,
        retry_max: float,
        *,
        texts: tuple[str, str] | None = None,
        quiet: Callable[[], bool] | None = None,
    ) -> None:
        self._name = name
        self._retry_max = retry_max
        #: the WARNING of a loss (operation, reason, retry_max) and of the way back (seconds,
        #: failed calls), after "worker NAME: "
        self._texts = texts or (_LOST_TEXT, _BACK_TEXT)
        #: while it returns True, a loss is not announced (another tracker speaks for it)
        self._quiet = quiet
        self._lock = threading.Lock()
        #: when the first call of the current outage failed (None: the server is reachable)
        self._since: float | None = None
        self._failed = 0
        #: whether the current outage was logged (not while it may be stale connections)
        self._announced = False
        self._back_at = -STALE_AFTER_BACK_S

    @property
    def down(self) -> bool:
        """True between a lost connection and the next call that got an answer."""
        return self._since is not None

    def settling(self) -> bool:
        """True while down, and for STALE_AFTER_BACK_S after an announced way back (calls
        on connections that went stale in the outage may still fail then)."""
        return self._since is not None or time.monotonic() - self._back_at < STALE_AFTER_BACK_S

    def lost(self, error: BaseException, operation: str) -> None:
        """A call (*operation*) failed on a lost connection: log it if it is the first."""
        now = time.monotonic()
        with self._lock:
            if self._since is None:
                self._since, self._failed, self._announced = now, 0, False
            self._failed += 1
            announce = not self._announced and now - self._back_at >= STALE_AFTER_BACK_S
        if announce and self._quiet is not None and self._quiet():
            announce = False
        if announce:
            with self._lock:
                self._announced = True
        reason = _WHITESPACE.sub(" ", failure_reason(error)).strip()
        if announce:
            log.warning(
                "worker %s: " + self._texts[0],
                self._name,
                operation,
                reason,
                self._retry_max,
                extra={"pgque_worker": self._name, "pgque_operation": operation},
            )
        else:
            log.debug("worker %s: %s failed again: %s", self._name, operation, reason)

    def reached(self, sent_at: float) -> None:
        """A call sent at *sent_at* (monotonic) got an answer: log the end of an outage.

        A call sent before the outage began says nothing about the server now: ignored.
        """
        since = self._since
        if since is None or sent_at < since:
            return
        now = time.monotonic()
        with self._lock:
            since, failed, announced = self._since, self._failed, self._announced
            if since is None:
                return
            self._since, self._failed = None, 0
            if announced:
                self._back_at = now
        if not announced:
            log.debug("worker %s: the next call answered (%d failed)", self._name, failed)
            return
        log.warning(
            "worker %s: " + self._texts[1],
            self._name,
            now - since,
            failed,
            extra={"pgque_worker": self._name},
        )
