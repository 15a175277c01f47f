"""Which ticks a scheduler publishes, decided without I/O: where an entry's ticks start, which
of those due at one moment to publish (the missed-tick policy), and when the next one falls."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pgque.core.errors import InvalidInput
from pgque.core.scheduling._entry import Schedule, ScheduleEntry

__all__ = [
    "PublishedTick",
    "Plan",
    "plan",
    "first_cursor",
    "next_wakeup",
    "check_now",
    "MAX_SLEEP_S",
]

#: The longest single sleep of a running scheduler: a wall clock that jumps (NTP, a suspended
#: machine) is noticed within this long, and no sleep outlasts a tick by more.
MAX_SLEEP_S = 5.0


@dataclass(frozen=True)
class PublishedTick:
    """A tick this scheduler appended: the entry's name, the tick (epoch seconds) and the
    message id the transport returned."""

    entry: str
    tick: float
    message_id: int


def check_now(now: object) -> float:
    """Return *now* as a float; raises InvalidInput unless it is finite epoch seconds."""
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise InvalidInput(f"now must be finite epoch seconds, not {now!r}")
    return float(now)


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


def next_wakeup(schedule: Schedule, cursors: Mapping[str, float], after: float) -> float | None:
    """Return the earliest tick of any entry of *schedule* later than both *after* and that
    entry's cursor (the latest tick known to be published); None if no entry has one, or one
    has no cursor yet (it was not read from the transport)."""
    ticks: list[float] = []
    for entry in schedule:
        cursor = cursors.get(entry.name)
        if cursor is None:
            return None
        tick = entry.next_tick(max(cursor, after))
        if tick is not None:
            ticks.append(tick)
    return min(ticks) if ticks else None
