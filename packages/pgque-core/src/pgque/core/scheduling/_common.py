"""What the blocking and the asyncio scheduler share: options, the plan of due ticks, logs."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.scheduling._entry import Schedule, ScheduleEntry
from pgque.core.worker._options import RECONNECT_BACKOFF, default_name

__all__ = [
    "PublishedTick",
    "SchedulerOptions",
    "Plan",
    "plan",
    "first_cursor",
    "clock_of",
    "check_transport",
    "stamp",
    "log",
    "MAX_SLEEP_S",
    "DEFAULT_GRACE_S",
]

log = logging.getLogger("pgque.scheduler")

#: The longest single sleep of a running scheduler: a wall clock that jumps (NTP, a suspended
#: machine) is noticed within this long, and no sleep outlasts a tick by more.
MAX_SLEEP_S = 5.0
#: How late a tick may be published and still count as on time (not missed): a slow wake-up,
#: a short outage, a pause of the process.
DEFAULT_GRACE_S = 10.0


@dataclass(frozen=True)
class PublishedTick:
    """A tick this scheduler appended: the entry's name, the tick (epoch seconds) and the
    message id the transport returned."""

    entry: str
    tick: float
    message_id: int


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


def first_cursor(last_tick: float | None, now: float) -> float:
    """Return where an entry's ticks start: after its recorded *last_tick*, else at *now*
    (a tick at *now* itself is due: ticks are whole seconds)."""
    if last_tick is not None:
        return last_tick
    return float(math.ceil(now) - 1)


@dataclass(frozen=True)
class Plan:
    """What to publish of one entry at one moment: the ticks, oldest first, and whether the
    policy left out earlier due ticks."""

    ticks: list[float]
    left_out: bool


def plan(entry: ScheduleEntry, cursor: float, now: float, grace: float) -> Plan:
    """Return which of *entry*'s ticks in (*cursor*, *now*] to publish.

    A tick at most *grace* seconds old is on time and always published. Older ones were
    missed: ``skip`` drops them, except the latest when no tick is on time; ``catch_up``
    publishes each, at most ``max_catch_up`` due ticks in all (the latest).
    """
    if entry.missed == "catch_up":
        ticks, more = entry.ticks_due(cursor, now, entry.max_catch_up)
        return Plan(ticks, more)
    # "At most grace seconds old" includes a tick exactly grace seconds old.
    on_time, more = entry.ticks_due(max(cursor, now - grace - 1e-3), now, entry.max_catch_up)
    if on_time:
        missed, _ = entry.ticks_due(cursor, on_time[0] - 1e-3, 1)
        return Plan(on_time, more or bool(missed))
    latest, more = entry.ticks_due(cursor, now, 1)
    return Plan(latest, more)


def stamp(tick: float) -> str:
    """Return *tick* as ISO 8601 in UTC, for logs."""
    return datetime.fromtimestamp(tick, timezone.utc).isoformat().replace("+00:00", "Z")
