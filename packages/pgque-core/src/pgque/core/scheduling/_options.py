"""A scheduler's options and what it is given: :class:`SchedulerOptions` (its name, the grace
of a late tick, the wait after an error), the schedule, the transport and the clock."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.scheduling._entry import Schedule
from pgque.core.worker._names import default_name
from pgque.core.worker._options import RECONNECT_BACKOFF

__all__ = [
    "SchedulerOptions",
    "DEFAULT_GRACE_S",
    "check_schedule",
    "check_transport",
    "clock_of",
]

#: How late a tick may be published and still count as on time (not missed): a slow wake-up,
#: a short outage, a pause of the process.
DEFAULT_GRACE_S = 10.0


@dataclass(frozen=True)
class SchedulerOptions:
    """A scheduler's validated options (see :class:`~pgque.core.Scheduler`)."""

    name: str
    grace: float
    reconnect_backoff: tuple[float, float]

    @classmethod
    def build(
        cls,
        *,
        name: str | None,
        grace: float,
        reconnect_backoff: tuple[float, float] = RECONNECT_BACKOFF,
    ) -> SchedulerOptions:
        """Check the options; raises InvalidInput for one out of range."""
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidInput(f"name must be a non-empty str, not {name!r}")
        if isinstance(grace, bool) or not isinstance(grace, (int, float)):
            raise InvalidInput(f"grace must be a number of seconds, not {grace!r}")
        if not math.isfinite(grace) or not 0 <= grace <= 86_400:
            raise InvalidInput(f"grace must be 0 to 86400 seconds, not {grace!r}")
        first, maximum = reconnect_backoff
        if not 0 < first <= maximum:
            raise InvalidInput("reconnect_backoff must be (first, maximum), 0 < first <= maximum")
        return cls(name or default_name(), float(grace), (float(first), float(maximum)))


def check_schedule(schedule: object) -> Schedule:
    """Return *schedule* if it is a non-empty :class:`Schedule`; raises InvalidInput."""
    if not isinstance(schedule, Schedule):
        raise InvalidInput(f"schedule must be a pgque.core.Schedule, not {type(schedule).__name__}")
    if not len(schedule):
        raise InvalidInput("the schedule has no entries")
    return schedule


def check_transport(transport: object) -> None:
    """Raise ConfigurationError unless *transport* has ``publish_tick`` and ``last_tick``."""
    for method in ("publish_tick", "last_tick"):
        if not callable(getattr(transport, method, None)):
            raise ConfigurationError(
                f"{type(transport).__name__} cannot run a schedule: it has no {method}() "
                "(upgrade the backend package)"
            )


def clock_of(transport: object, clock: Callable[[], float] | None) -> Callable[[], float]:
    """Return the clock a scheduler reads: *clock*, else the transport's injected one, else
    ``time.time``."""
    if clock is not None:
        if not callable(clock):
            raise InvalidInput("clock must be a callable returning epoch seconds")
        return clock
    injected = getattr(transport, "clock", None)
    return injected if callable(injected) else time.time
