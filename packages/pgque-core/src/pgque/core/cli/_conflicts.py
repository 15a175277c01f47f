"""A command's call that conflicts with concurrent work (a deadlock, a serialization
failure) was rolled back whole: :func:`retrying` runs it again, a few times, with a pause."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from pgque.core.cli._errors import CliError
from pgque.core.errors import RetryableConflict
from pgque.core.worker import Backoff

__all__ = ["retrying", "CONFLICT_ATTEMPTS", "CONFLICT_BACKOFF", "CONFLICT_JITTER"]

T = TypeVar("T")

#: How many times a command makes a call that keeps conflicting with concurrent work.
CONFLICT_ATTEMPTS = 5
#: The first and the longest pause between two of those attempts, in seconds (jittered).
CONFLICT_BACKOFF = (0.05, 1.0)
#: Each pause is drawn from half to all of its step (see :class:`~pgque.core.worker.Backoff`).
CONFLICT_JITTER = 0.5


def retrying(call: Callable[[], T], what: str) -> T:
    """Return ``call()``, running it again after a RetryableConflict, with a doubling pause.

    A conflict (deadlock, serialization failure) was rolled back whole, so running the call
    again is safe. Raises CliError (one line) after CONFLICT_ATTEMPTS conflicts in a row, and
    whatever else *call* raises.
    """
    # Jittered, so that two commands that collided do not collide again in step.
    backoff = Backoff(*CONFLICT_BACKOFF, jitter=CONFLICT_JITTER)
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return call()
        except RetryableConflict as exc:
            if attempt == CONFLICT_ATTEMPTS:
                raise CliError(
                    f"{what} conflicted with concurrent work {CONFLICT_ATTEMPTS} times (each "
                    f"attempt was rolled back; nothing changed); try again: {exc}"
                ) from exc
        time.sleep(backoff.next())
    raise AssertionError("unreachable")  # pragma: no cover
