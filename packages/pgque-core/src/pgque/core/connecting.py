"""Reaching a server, as every backend does it: the connect timeout (one option under two
names), the doubling pause between attempts within it, and what a refused connection says.

Pure (no I/O): the drivers, blocking and asyncio, sleep and connect themselves.
"""

from __future__ import annotations

import time

from pgque.core.errors import InvalidInput
from pgque.core.validation import check_seconds

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "connect_timeout_of",
    "refused",
    "Backoff",
    "retries_within",
]

#: How long reaching the server may take by default (``connect_timeout``, seconds), retries
#: included.
DEFAULT_CONNECT_TIMEOUT = 10.0

#: How a client library words "nothing listens there": a TCP port that refuses, a socket file
#: that is gone (libpq and redis-py alike).
_REFUSED = ("Connection refused", "No such file or directory")


def connect_timeout_of(timeout: float | None, connect_timeout: float | None) -> float:
    """Return the connect timeout of ``timeout`` and ``connect_timeout`` (two names of one
    option: both given must agree), else :data:`DEFAULT_CONNECT_TIMEOUT`; checked.

    Raises InvalidInput for two different values or one that is not a number of seconds.
    """
    if timeout is not None and connect_timeout is not None and timeout != connect_timeout:
        raise InvalidInput(
            f"timeout ({timeout!r}) and connect_timeout ({connect_timeout!r}) name the same "
            "option: give one"
        )
    chosen = connect_timeout if connect_timeout is not None else timeout
    if chosen is None:
        return DEFAULT_CONNECT_TIMEOUT
    return check_seconds(chosen, "connect_timeout")


def refused(exc: BaseException) -> bool:
    """Tell whether *exc* says that nothing listens at the address (no server there now)."""
    message = str(exc)
    return any(text in message for text in _REFUSED)


class Backoff:
    """The pauses between attempts to reach a server: *first* seconds, doubling up to
    *longest*, while the next pause ends within *seconds* from now (and, with *retries*, for
    that many retries at most). The caller sleeps :meth:`pause` between two attempts."""

    def __init__(
        self, seconds: float, first: float, longest: float, retries: int | None = None
    ) -> None:
        self.deadline = time.monotonic() + seconds
        self.next_pause = first
        self.longest = longest
        self.retries = retries
        #: the retries taken so far
        self.attempt = 0

    @property
    def remaining(self) -> float:
        """Seconds until the deadline (negative past it)."""
        return self.deadline - time.monotonic()

    def late(self) -> bool:
        """Tell whether the next pause would end past the deadline."""
        return time.monotonic() + self.next_pause > self.deadline

    def spent(self) -> bool:
        """Tell whether every retry allowed has been taken."""
        return self.retries is not None and self.attempt >= self.retries

    def pause(self) -> float:
        """Return the pause before the next attempt, and double the one after it."""
        pause = self.next_pause
        self.attempt += 1
        self.next_pause = min(pause * 2, self.longest)
        return pause


def retries_within(seconds: float, first: float, longest: float, most: int = 100) -> int:
    """Return how many retries of a :class:`Backoff` from *first* to *longest* add up to
    *seconds* of pauses (at most *most*)."""
    retries, pause, waited = 0, first, 0.0
    while waited < seconds and retries < most:
        waited += pause
        pause = min(pause * 2, longest)
        retries += 1
    return retries
