"""Retry and backoff maths shared by :class:`Worker` and :class:`AsyncWorker`.

Nothing here waits or does I/O: the runners ask these objects *how long* and do the waiting
themselves, threads or tasks.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from pgque.core.errors import InvalidInput
from pgque.core.validation import MAX_REASON_CHARS, MAX_VISIBILITY_S
from pgque.core.worker._bounds import Bounds

__all__ = ["RetryPolicy", "RETRY_BOUNDS", "Backoff", "Retry", "Reject", "StopWorker"]

#: The range of each field of a :class:`RetryPolicy` (seconds: at most one year; the factor
#: has no upper bound but must be finite).
RETRY_BOUNDS: dict[str, Bounds] = {
    "base": Bounds(0, MAX_VISIBILITY_S),
    "factor": Bounds(1, math.inf),
    "max_delay": Bounds(0, MAX_VISIBILITY_S),
    "jitter": Bounds(0, 1),
}


def _seconds(
    value: object, name: str, *, positive: bool = False, high: float = MAX_VISIBILITY_S
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number of seconds, not {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        bound = "> 0" if positive else ">= 0"
        raise InvalidInput(f"{name} must be finite and {bound}, not {value!r}")
    if seconds > high:
        raise InvalidInput(f"{name} must be at most one year, not {value!r}")
    return seconds


@dataclass(frozen=True)
class RetryPolicy:
    """How long a failed message waits before its next attempt: exponential with jitter.

    The delay after attempt *n* (1 on first delivery) is ``base * factor ** (n - 1)``, capped
    at ``max_delay``, then spread by ``±jitter`` (a fraction: ``0.1`` is ±10 %) so that many
    groups failing together do not come back together; the result never exceeds
    ``max_delay``. A nack with a delay parks the message's whole group until it passes (its
    later messages wait too: that is what keeps a group in order).
    Raises InvalidInput for a negative base or max_delay, a factor below 1 or a jitter outside
    0..1.
    """

    base: float = 1.0
    factor: float = 2.0
    max_delay: float = 300.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        _seconds(self.base, "base", high=RETRY_BOUNDS["base"].high)
        _seconds(self.max_delay, "max_delay", high=RETRY_BOUNDS["max_delay"].high)
        if (
            isinstance(self.factor, bool)
            or not isinstance(self.factor, (int, float))
            or not math.isfinite(self.factor)
            or not RETRY_BOUNDS["factor"].holds(self.factor)
        ):
            raise InvalidInput(f"factor must be a finite number >= 1, not {self.factor!r}")
        if (
            isinstance(self.jitter, bool)
            or not isinstance(self.jitter, (int, float))
            or not RETRY_BOUNDS["jitter"].holds(self.jitter)
        ):
            raise InvalidInput(f"jitter must be a number from 0 to 1, not {self.jitter!r}")

    def raw_delay(self, attempt: int) -> float:
        """Return the delay after *attempt* without jitter (attempts below 1 count as 1)."""
        exponent = max(int(attempt), 1) - 1
        try:
            delay = self.base * self.factor**exponent
        except OverflowError:
            return self.max_delay
        return min(delay, self.max_delay)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Return the delay in seconds before the attempt after *attempt*, with jitter."""
        delay = self.raw_delay(attempt)
        if self.jitter and delay:
            spread = (rng or random).uniform(-self.jitter, self.jitter)
            delay *= 1.0 + spread
        return min(max(delay, 0.0), self.max_delay)


class Backoff:
    """A bounded exponential backoff: ``first``, doubling, never above ``maximum``.

    Used for idle waits between empty claims, for waits after a lost connection or a conflict
    (the worker's and the command line's), and :meth:`reset` after a success. With *jitter*
    (a fraction from 0 to 1) each wait is drawn uniformly from ``[(1 - jitter) * step, step]``,
    so that two callers whose calls collided (a deadlock) do not retry in step; *rng* makes the
    draws repeatable in tests. Not thread-safe: each worker slot owns its own.
    Raises InvalidInput unless ``0 < first <= maximum`` and ``0 <= jitter <= 1``.
    """

    def __init__(
        self,
        first: float,
        maximum: float,
        factor: float = 2.0,
        *,
        jitter: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        self.first = _seconds(first, "first", positive=True)
        self.maximum = _seconds(maximum, "maximum", positive=True)
        if self.maximum < self.first:
            raise InvalidInput(f"maximum ({maximum}) must be >= first ({first})")
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0 <= jitter <= 1:
            raise InvalidInput(f"jitter must be a number from 0 to 1, not {jitter!r}")
        self.factor = factor
        self.jitter = float(jitter)
        self._rng = rng
        self._next = self.first

    def next(self) -> float:
        """Return the next wait (jittered, if asked) and grow the step after it."""
        step = self._next
        self._next = min(self._next * self.factor, self.maximum)
        if self.jitter:
            step *= 1.0 - (self._rng or random).uniform(0.0, self.jitter)
        return step

    def peek(self) -> float:
        """Return the next step without growing it (before jitter)."""
        return self._next

    def reset(self) -> None:
        """Start again from ``first``."""
        self._next = self.first


class Retry(Exception):
    """Raised by a handler to retry its message after *delay* seconds.

    ``Retry()`` with no delay uses the worker's :class:`RetryPolicy`. The message is nacked
    (its group parked for *delay*); the transport's ``max_attempts`` still applies.
    Raises InvalidInput for a negative or non-finite delay.
    """

    def __init__(self, delay: float | None = None) -> None:
        self.delay = None if delay is None else _seconds(delay, "delay")
        super().__init__(
            "retry requested" if delay is None else f"retry requested in {self.delay:g}s"
        )


class Reject(Exception):
    """Raised by a handler to dead-letter its message at once, with *reason*.

    The group continues with its next message; ``redrive`` can bring the message back.
    """

    def __init__(self, reason: str = "rejected by handler") -> None:
        reason = str(reason).replace("\x00", "") or "rejected by handler"
        self.reason = reason[:MAX_REASON_CHARS]
        super().__init__(self.reason)


class StopWorker(Exception):
    """Raised by a handler (or a layer around it) to stop the worker with *error*.

    For an error that is not the message's fault and that retrying will not cure (a
    configuration that cannot work): the message is released without a retry delay for a
    correctly configured worker, it is not counted as a failure, the worker stops gracefully
    and its ``run()`` raises *error*.
    """

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(f"the worker must stop: {type(error).__name__}: {error}")
