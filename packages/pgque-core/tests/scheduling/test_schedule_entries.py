"""Schedule entries: cron parsing (with seconds), time zones across DST, policies, bad input."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from pgque.core import InvalidInput, Schedule, ScheduleEntry
from pgque.core.scheduling import ENTRY_HEADER, TICK_HEADER
from pgque.core.scheduling._ticks import first_cursor, plan

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")


def _at(
    year: int, month: int, day: int, hour: int, minute: int, second: int, tz: Any = UTC
) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=tz).timestamp()


def _entry(cron: str = "* * * * *", **options: Any) -> ScheduleEntry:
    values: dict[str, Any] = {"name": "e", "cron": cron, "group_id": "g", "kind": "tick"}
    return ScheduleEntry(**{**values, **options})


def _local(ticks: list[float], tz: ZoneInfo = BERLIN) -> list[str]:
    return [datetime.fromtimestamp(t, tz).isoformat() for t in ticks]


def test_five_fields_are_minutes() -> None:
    entry = _entry("*/15 * * * *")
    start = _at(2026, 1, 1, 10, 0, 0)
    assert entry.next_ticks(start, 3) == [start + 900, start + 1800, start + 2700]
    assert not entry.has_seconds


def test_six_fields_start_with_seconds() -> None:
    entry = _entry("*/10 * * * * *")
    start = _at(2026, 1, 1, 10, 0, 0)
    assert entry.next_ticks(start, 3) == [start + 10, start + 20, start + 30]
    assert entry.has_seconds
    every_second = _entry("* * * * * *")
    assert every_second.next_ticks(start + 0.5, 2) == [start + 1, start + 2]


def test_next_tick_is_strictly_after() -> None:
    entry = _entry("0 * * * *")
    noon = _at(2026, 1, 1, 12, 0, 0)
    assert entry.next_tick(noon) == noon + 3600
    assert entry.next_tick(noon - 0.5) == noon


def test_nicknames() -> None:
    entry = _entry("@daily", tz="Europe/Berlin")
    (tick,) = entry.next_ticks(_at(2026, 6, 1, 12, 0, 0), 1)
    assert _local([tick]) == ["2026-06-02T00:00:00+02:00"]


def test_time_zone_is_honoured() -> None:
    entry = _entry("0 9 * * *", tz="America/New_York")
    (tick,) = entry.next_ticks(_at(2026, 1, 5, 0, 0, 0), 1)
    assert datetime.fromtimestamp(tick, UTC).isoformat() == "2026-01-05T14:00:00+00:00"


def test_dst_spring_forward_runs_a_missing_wall_time_at_the_next_one() -> None:
    # 2026-03-29: Berlin's clocks jump from 02:00 to 03:00; 02:30 does not exist that day.
    daily = _entry("30 2 * * *", tz="Europe/Berlin")
    ticks = daily.next_ticks(_at(2026, 3, 28, 12, 0, 0), 3)
    assert _local(ticks) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]
    hourly = _entry("0 * * * *", tz="Europe/Berlin")
    ticks = hourly.next_ticks(_at(2026, 3, 29, 0, 30, 0, tz=BERLIN), 3)
    assert _local(ticks) == [
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]
    assert ticks[1] - ticks[0] == 3600  # one real hour


def test_dst_fall_back_runs_a_repeated_wall_time_once_but_every_hour_of_real_time() -> None:
    # 2026-10-25: Berlin's clocks go back from 03:00 to 02:00; 02:00-02:59 happens twice.
    daily = _entry("30 2 * * *", tz="Europe/Berlin")
    ticks = daily.next_ticks(_at(2026, 10, 24, 12, 0, 0), 2)
    assert _local(ticks) == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]
    hourly = _entry("0 * * * *", tz="Europe/Berlin")
    ticks = hourly.next_ticks(_at(2026, 10, 25, 0, 30, 0, tz=BERLIN), 4)
    assert _local(ticks) == [
        "2026-10-25T01:00:00+02:00",
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]
    # Looking back (what a scheduler does after downtime) agrees with looking forward.
    due, more = daily.ticks_due(_at(2026, 10, 24, 12, 0, 0), _at(2026, 10, 26, 12, 0, 0), 10)
    assert (due, more) == (daily.next_ticks(_at(2026, 10, 24, 12, 0, 0), 2), False)


def test_ticks_due_is_after_to_until_inclusive_and_keeps_the_latest() -> None:
    entry = _entry("* * * * * *")
    base = _at(2026, 1, 1, 0, 0, 0)
    assert entry.ticks_due(base, base + 3, 10) == ([base + 1, base + 2, base + 3], False)
    assert entry.ticks_due(base, base + 3.7, 10) == ([base + 1, base + 2, base + 3], False)
    assert entry.ticks_due(base, base + 10, 2) == ([base + 9, base + 10], True)
    assert entry.ticks_due(base, base, 5) == ([], False)


def test_event_of_a_tick() -> None:
    entry = _entry(data={"report": "daily"}, headers={"team": "ops"}, name="nightly")
    tick = _at(2026, 1, 1, 3, 0, 0)
    first, second = entry.event_at(tick), entry.event_at(tick)
    assert first.kind == "tick"
    assert first.data == {"report": "daily"}
    assert first.headers == {
        "team": "ops",
        TICK_HEADER: "2026-01-01T03:00:00+00:00",
        ENTRY_HEADER: "nightly",
    }
    assert first.id != second.id  # a fresh event per publish
    assert datetime.fromisoformat(first.headers[TICK_HEADER]).timestamp() == tick


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression '61 * * * *'"),
        ({"cron": "every minute"}, "expected 5 fields"),
        ({"cron": "* * *"}, "got 3"),
        ({"cron": "* * * * * * *"}, "got 7"),
        ({"cron": ""}, "got 0"),
        ({"cron": 5}, "cron must be a str"),
        ({"cron": "0 0 30 2 *"}, "never matches"),
        ({"tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"tz": ""}, "tz must be a time zone name"),
        ({"name": ""}, "entry must not be empty"),
        ({"name": "x" * 201}, "the limit is 200"),
        ({"group_id": ""}, "group_id"),
        ({"priority": 9}, "priority"),
        ({"missed": "later"}, "missed must be 'skip' or 'catch_up'"),
        ({"max_catch_up": 0}, "max_catch_up must be 1 to 100000"),
        ({"max_catch_up": True}, "max_catch_up must be an int"),
        ({"data": {1, 2}}, "invalid event"),
        ({"kind": ""}, "invalid event"),
    ],
)
def test_bad_entries_are_refused_at_construction(options: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidInput, match=None) as caught:
        _entry(**options)
    assert words in str(caught.value)


def test_schedule_refuses_duplicate_names() -> None:
    schedule = Schedule([_entry(name="a"), _entry(name="b")])
    assert [e.name for e in schedule] == ["a", "b"]
    assert len(schedule) == 2
    assert "a" in schedule
    assert schedule["b"].name == "b"
    with pytest.raises(InvalidInput, match="already has an entry named 'a'"):
        schedule.add(_entry(name="a", cron="0 * * * *"))
    with pytest.raises(InvalidInput, match="already has an entry named 'x'"):
        Schedule([_entry(name="x"), _entry(name="x")])
    with pytest.raises(InvalidInput, match="ScheduleEntry"):
        schedule.add("a")  # type: ignore[arg-type]


def test_first_cursor() -> None:
    assert first_cursor(None, 100.0) == 99.0  # a tick at the start itself is due
    assert first_cursor(None, 100.4) == 100.0
    assert first_cursor(95.0, 100.4) == 95.0


def test_plan_on_time_ticks_are_published_whatever_the_policy() -> None:
    entry = _entry("* * * * * *")
    base = _at(2026, 1, 1, 0, 0, 0)
    result = plan(entry, base, base + 3, grace=10)
    assert (result.ticks, result.left_out) == ([base + 1, base + 2, base + 3], False)


def test_plan_skip_publishes_only_the_latest_missed_tick() -> None:
    entry = _entry("0 * * * *")  # hourly
    base = _at(2026, 1, 1, 0, 0, 0)
    result = plan(entry, base, base + 5 * 3600 + 600, grace=10)
    assert (result.ticks, result.left_out) == ([base + 5 * 3600], True)
    seconds = _entry("* * * * * *")
    # A later tick is on time: it is published, every missed one is left out.
    result = plan(seconds, base, base + 100, grace=2)
    assert (result.ticks, result.left_out) == ([base + 98, base + 99, base + 100], True)


def test_plan_catch_up_publishes_each_missed_tick_up_to_its_maximum() -> None:
    entry = _entry("0 * * * *", missed="catch_up", max_catch_up=3)
    base = _at(2026, 1, 1, 0, 0, 0)
    result = plan(entry, base, base + 2 * 3600 + 1, grace=10)
    assert (result.ticks, result.left_out) == ([base + 3600, base + 7200], False)
    result = plan(entry, base, base + 10 * 3600, grace=10)
    hours = [base + h * 3600 for h in (8, 9, 10)]
    assert (result.ticks, result.left_out) == (hours, True)
