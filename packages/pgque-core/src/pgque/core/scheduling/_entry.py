"""Schedule entries and schedules: cron expressions (croniter), time zones, missed-tick policies.

Nothing here does I/O: an entry turns a cron expression in a time zone into tick times (epoch
seconds), and says which ticks a scheduler publishes when it finds several due at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from pgque.core.errors import InvalidInput
from pgque.core.fairness import check_fairness_key
from pgque.core.models import Event
from pgque.core.validation import check_entry_name, check_group_id, check_priority

__all__ = [
    "MissedTicks",
    "ScheduleEntry",
    "Schedule",
    "TICK_HEADER",
    "ENTRY_HEADER",
    "MAX_CATCH_UP_LIMIT",
]

#: What a scheduler does with the ticks of an entry that no scheduler published in time.
MissedTicks = Literal["skip", "catch_up"]

#: The header of each published event that holds its tick (ISO 8601, UTC).
TICK_HEADER = "pgque-tick"
#: The header of each published event that names its schedule entry.
ENTRY_HEADER = "pgque-schedule-entry"
#: The largest ``max_catch_up`` an entry may ask for.
MAX_CATCH_UP_LIMIT = 100_000

#: The cron nicknames croniter understands, spelled out (so the hour field can be read).
_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _check_cron(cron: object) -> tuple[str, bool, bool]:
    """Return *cron* spelled out, whether it has a seconds field, and whether its hour is ``*``.

    Raises InvalidInput for anything but 5 fields (minute hour day month weekday), 6 fields
    (second first) or a nickname such as ``@daily``.
    """
    if not isinstance(cron, str):
        raise InvalidInput(f"cron must be a str such as '*/5 * * * *', not {type(cron).__name__}")
    text = " ".join(cron.split())
    expanded = _NICKNAMES.get(text.lower(), text)
    fields = expanded.split(" ") if expanded else []
    if len(fields) not in (5, 6):
        raise InvalidInput(
            f"invalid cron expression {cron!r}: expected 5 fields (minute hour day month "
            f"weekday) or 6 (second minute hour day month weekday), got {len(fields)}"
        )
    seconds = len(fields) == 6
    hour = fields[2] if seconds else fields[1]
    return expanded, seconds, hour == "*"


def _zone(tz: object) -> ZoneInfo:
    if not isinstance(tz, str) or not tz:
        raise InvalidInput(f"tz must be a time zone name such as 'Europe/Berlin', not {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidInput(f"unknown time zone {tz!r} (an IANA name such as 'UTC')") from exc


@dataclass(frozen=True)
class ScheduleEntry:
    """One periodic message: at each tick of *cron* in time zone *tz*, publish an event.

    - *name*: unique in its :class:`Schedule`; with the queue it names the entry's tick record,
      so renaming an entry starts it afresh.
    - *cron*: 5 fields (``minute hour day month weekday``), 6 fields with the second first
      (``*/10 * * * * *``: every 10 s), or a nickname (``@hourly``, ``@daily``, ...); parsed
      by croniter (``H`` hashes by *name*).
    - *tz*: the IANA time zone the expression is read in (default ``UTC``). Across a DST
      change: a wall time that does not exist runs at the first one after it; a wall time
      that happens twice runs once (the first time) unless the hour field is ``*``, which
      runs every hour of real time.
    - *group_id*, *kind*, *data*, *headers*, *priority*, *fairness_key*: what each tick
      publishes (the key as ``publish`` takes it, docs/fairness.md): a fresh
      :class:`~pgque.core.Event` with *kind*, *data* and *headers*, plus the headers
      ``pgque-tick`` (the tick, ISO 8601 UTC) and ``pgque-schedule-entry`` (*name*).
    - *missed*: ``skip`` (default): of ticks no scheduler published in time, only the latest
      is published; ``catch_up``: each is, oldest first, at most *max_catch_up* of them
      (the latest ones).

    Raises InvalidInput for an invalid name, cron expression, time zone, group id, priority,
    event, policy or maximum.
    """

    name: str
    cron: str
    group_id: str
    kind: str
    data: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    tz: str = "UTC"
    priority: int = 0
    missed: MissedTicks = "skip"
    max_catch_up: int = 100
    fairness_key: str | None = None
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)
    _expanded: str = field(init=False, repr=False, compare=False)
    _seconds: bool = field(init=False, repr=False, compare=False)
    _any_hour: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_entry_name(self.name)
        expanded, seconds, any_hour = _check_cron(self.cron)
        zone = _zone(self.tz)
        check_group_id(self.group_id)
        check_priority(self.priority)
        check_fairness_key(self.fairness_key)
        if self.missed not in get_args(MissedTicks):
            raise InvalidInput(f"missed must be 'skip' or 'catch_up', not {self.missed!r}")
        limit = self.max_catch_up
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidInput(f"max_catch_up must be an int, not {type(limit).__name__}")
        if not 1 <= limit <= MAX_CATCH_UP_LIMIT:
            raise InvalidInput(f"max_catch_up must be 1 to {MAX_CATCH_UP_LIMIT}, not {limit}")
        if not isinstance(self.headers, Mapping):
            raise InvalidInput(f"headers must be a mapping, not {type(self.headers).__name__}")
        object.__setattr__(self, "headers", dict(self.headers))
        object.__setattr__(self, "_zone", zone)
        object.__setattr__(self, "_expanded", expanded)
        object.__setattr__(self, "_seconds", seconds)
        object.__setattr__(self, "_any_hour", any_hour)
        try:
            croniter(expanded, 0, **self._cron_options())
        except (CroniterError, ValueError, KeyError) as exc:
            raise InvalidInput(f"invalid cron expression {self.cron!r}: {exc}") from exc
        self.event_at(0.0)  # refuses data that is not JSON, a bad kind or bad headers
        if self.next_tick(0.0) is None:
            raise InvalidInput(f"cron expression {self.cron!r} never matches")

    def _cron_options(self) -> dict[str, Any]:
        return {"second_at_beginning": self._seconds, "hash_id": self.name.encode()}

    @property
    def zone(self) -> ZoneInfo:
        """The entry's time zone."""
        return self._zone

    @property
    def has_seconds(self) -> bool:
        """True when the expression has a seconds field (6 fields)."""
        return self._seconds

    def _iterator(self, start: float) -> croniter:
        when = datetime.fromtimestamp(start, self.zone)
        return croniter(self._expanded, when, **self._cron_options())

    def _repeated(self, tick: float) -> bool:
        """True for the second pass of a wall time that a DST change repeats (see the class)."""
        if self._any_hour:
            return False
        return datetime.fromtimestamp(tick, self.zone).fold == 1

    def next_tick(self, after: float) -> float | None:
        """Return the first tick strictly after *after* (epoch seconds); None if none follows."""
        iterator = self._iterator(math.floor(after))
        for _ in range(4):  # a repeated wall time is skipped at most a few times in a row
            try:
                tick = float(iterator.get_next(float))
            except CroniterError:
                return None
            if not self._repeated(tick):
                return tick
        return None  # pragma: no cover - no zone repeats a wall time four times over

    def next_ticks(self, after: float, count: int) -> list[float]:
        """Return the next *count* ticks strictly after *after*, oldest first."""
        ticks: list[float] = []
        last = after
        while len(ticks) < count:
            tick = self.next_tick(last)
            if tick is None:
                break
            ticks.append(tick)
            last = tick
        return ticks

    def ticks_due(self, after: float, until: float, limit: int) -> tuple[list[float], bool]:
        """Return the ticks in (*after*, *until*], at most the latest *limit*, oldest first,
        and whether earlier ones were left out."""
        iterator = self._iterator(math.floor(until) + 1)  # get_prev is strict: until counts
        latest: list[float] = []
        while True:
            try:
                tick = float(iterator.get_prev(float))
            except CroniterError:
                break
            if tick <= after:
                break
            if self._repeated(tick):
                continue
            if len(latest) == limit:
                latest.reverse()
                return latest, True
            latest.append(tick)
        latest.reverse()
        return latest, False

    def event_at(self, tick: float) -> Event:
        """Return the fresh event that tick *tick* publishes."""
        stamp = datetime.fromtimestamp(tick, timezone.utc).isoformat()
        headers = {**self.headers, TICK_HEADER: stamp, ENTRY_HEADER: self.name}
        data = {} if self.data is None else self.data
        return Event(kind=self.kind, data=data, headers=headers)

    def describe_policy(self) -> str:
        """Return the missed-tick policy in a few words (``catch_up <=100``)."""
        if self.missed == "catch_up":
            return f"catch_up <={self.max_catch_up}"
        return "skip"


class Schedule:
    """The entries one scheduler publishes: each with a unique name.

    Build it from entries (``Schedule([ScheduleEntry(...), ...])``) or add them one by one with
    :meth:`add`. Raises InvalidInput for a repeated name or a non-entry.
    """

    def __init__(self, entries: Iterable[ScheduleEntry] = ()) -> None:
        self._entries: dict[str, ScheduleEntry] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: ScheduleEntry) -> ScheduleEntry:
        """Add *entry* and return it. Raises InvalidInput if its name is taken."""
        if not isinstance(entry, ScheduleEntry):
            raise InvalidInput(f"a schedule holds ScheduleEntry objects, not {entry!r}")
        if entry.name in self._entries:
            raise InvalidInput(f"the schedule already has an entry named {entry.name!r}")
        self._entries[entry.name] = entry
        return entry

    def __iter__(self) -> Iterator[ScheduleEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __getitem__(self, name: str) -> ScheduleEntry:
        return self._entries[name]

    def __repr__(self) -> str:
        return f"Schedule({list(self._entries)!r})"
