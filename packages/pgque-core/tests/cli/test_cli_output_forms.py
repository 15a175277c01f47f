"""One form for times in JSON, no empty tables, no cut lines when piped (issue 29, E).

Through the console script against the test PostgreSQL: every ``--json`` output gives its
times as ISO 8601 in UTC with the zone written ``+00:00`` and microseconds, never as epoch
numbers; a table with no rows prints only its message; ``pgque schedules`` piped is never
cut.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pgque.core import Event, Transport, connect

Run = Callable[..., subprocess.CompletedProcess[str]]

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00")
#: Keys whose values are durations or counts, not times.
NOT_TIMES = {"oldest_age_s", "elapsed_s"}


@pytest.fixture
def busy(postgres_url: str) -> Iterator[tuple[str, Transport]]:
    """A queue with a parked group, a dead letter and a scheduled message; purged after."""
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}queue=cli_forms_{uuid.uuid4().hex[:10]}"
    with connect(url) as transport:
        transport.publish("parked", Event(kind="k"))
        lease = transport.claim()
        assert lease is not None
        assert transport.nack(lease, delay=600, error=ValueError("bad"))
        transport.publish("dead", Event(kind="k"))
        lease = transport.claim()
        assert lease is not None
        assert transport.dead_letter(lease, "rejected", error=ValueError("worse"))
        transport.publish("later", Event(kind="k"), delay=600)
        yield url, transport
        transport.purge()  # type: ignore[attr-defined]


def _times(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Yield (key, value) of every leaf that names a time (``*_at``, ``at``, ``next_due``...)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _times(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from _times(item, key)
    elif key not in NOT_TIMES and (key.endswith("_at") or key in {"at", "next_due", "last_tick"}):
        yield key, value
    elif isinstance(value, float) and key not in NOT_TIMES:
        yield key, value  # a float that is not a known duration: an epoch time in disguise


def _check_times(lines: str) -> int:
    seen = 0
    for line in lines.splitlines():
        for key, value in _times(json.loads(line)):
            if value is None:
                continue
            assert isinstance(value, str), (key, value)
            assert ISO.fullmatch(value), (key, value)
            assert datetime.fromisoformat(value).utcoffset() is not None
            seen += 1
    return seen


def test_every_json_time_is_iso_8601_utc(
    pgque: Run, busy: tuple[str, Transport], tmp_path: Path
) -> None:
    url, transport = busy
    (letter,) = transport.dead_letters()
    (tmp_path / "beat.py").write_text(
        "from pgque.core import Schedule, ScheduleEntry\n"
        "schedule = Schedule([ScheduleEntry(name='e', cron='0 9 * * *', group_id='g', "
        "kind='k')])\n"
    )
    commands = [
        ("stats", "--json"),
        ("queues", "--json"),
        ("groups", "--json"),
        ("group", "parked", "--json"),
        ("dead-letters", "list", "--json"),
        ("dead-letters", "show", str(letter.id), "--json"),
        ("scheduled", "--json"),
        ("schedules", "beat:schedule", "--json"),
    ]
    for command in commands:
        result = pgque(*command, "--url", url)
        assert result.returncode == 0, (command, result.stderr)
        assert _check_times(result.stdout) > 0, command


def test_an_empty_listing_prints_only_its_message(pgque: Run, busy: tuple[str, Transport]) -> None:
    url, transport = busy
    transport.redrive()  # no dead letters left; the queue is still in use
    for command, message in [
        (("groups", "--state", "blocked"), "no groups in state blocked"),
        (("groups", "--after", "zzz"), "no groups after 'zzz'"),
        (("dead-letters", "list"), "no dead letters"),
        (("scheduled", "--after", "999999999"), "no scheduled messages after 999999999"),
    ]:
        result = pgque(*command, "--url", url)
        assert result.returncode == 0, (command, result.stderr)
        assert result.stdout == "", (command, result.stdout)
        assert result.stderr.strip() == message


def test_queues_with_none_prints_only_its_message(pgque: Run) -> None:
    result = pgque("queues", "--url", "memory://")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.strip() == "no queues hold messages or dead letters there"


def test_schedules_piped_is_never_cut(
    pgque: Run, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    clean_env.pop("COLUMNS", None)  # (a width asked for with COLUMNS is fitted)
    name = "nightly-report-of-every-tenant-in-every-region-" + "x" * 40
    group = "reports-of-the-whole-company-" + "y" * 40
    (tmp_path / "beat.py").write_text(
        "from pgque.core import Schedule, ScheduleEntry\n"
        f"schedule = Schedule([ScheduleEntry(name={name!r}, cron='30 2 * * *', "
        f"tz='America/Argentina/Buenos_Aires', group_id={group!r}, kind='report.nightly')])\n"
    )
    result = pgque("schedules", "beat:schedule")
    assert result.returncode == 0, result.stderr
    assert name in result.stdout
    assert group in result.stdout
    assert "America/Argentina/Buenos_Aires" in result.stdout
    assert "…" not in result.stdout
