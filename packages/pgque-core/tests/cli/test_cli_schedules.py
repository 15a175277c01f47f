"""``pgque schedules`` and ``pgque scheduler``'s refusals, through the console script
(the processes against a real server: test_cli_scheduler_services.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

Run = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.timeout(60)

BEAT = textwrap.dedent(
    """
    from pgque.core import Schedule, ScheduleEntry

    schedule = Schedule(
        [
            ScheduleEntry(name="heartbeat", cron="*/10 * * * * *", group_id="beats", kind="beat"),
            ScheduleEntry(
                name="nightly-report",
                cron="30 2 * * *",
                tz="Europe/Berlin",
                group_id="reports",
                kind="report.nightly",
                missed="catch_up",
                max_catch_up=3,
            ),
        ]
    )
    empty = Schedule()
    not_a_schedule = 42
    """
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "beat.py").write_text(BEAT)
    return tmp_path


def test_schedules_lists_entries_and_next_due_times_as_json(pgque: Run, folder: Path) -> None:
    result = pgque("schedules", "beat:schedule", "--json", "-n", "2", cwd=folder)
    assert result.returncode == 0, result.stderr
    beat, nightly = (json.loads(line) for line in result.stdout.splitlines())
    assert beat["name"] == "heartbeat"
    assert (beat["cron"], beat["tz"], beat["missed"]) == ("*/10 * * * * *", "UTC", "skip")
    first, second = (datetime.fromisoformat(t).timestamp() for t in beat["next_due"])
    assert second - first == 10
    assert first % 10 == 0
    assert first > time.time() - 1
    assert "last_tick" not in beat  # no URL: no queue was read
    assert nightly["group_id"] == "reports"
    assert nightly["missed"] == "catch_up"
    assert nightly["max_catch_up"] == 3
    for due in nightly["next_due"]:  # 02:30 in Berlin is 00:30 or 01:30 UTC
        assert due.endswith(("T00:30:00.000000+00:00", "T01:30:00.000000+00:00")), due


def test_schedules_table_fits_80_columns(pgque: Run, folder: Path) -> None:
    result = pgque("schedules", "beat:schedule", cwd=folder, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    assert "nightly-report" in result.stdout
    assert "catch_up <=3" in result.stdout
    assert "Europe/Berlin" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_schedules_with_a_url_shows_the_last_tick(pgque: Run, folder: Path) -> None:
    # memory:// is private to the process: nothing was published there yet.
    result = pgque("schedules", "beat:schedule", "--json", "--url", "memory://", cwd=folder)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["last_tick"] for line in lines] == [None, None]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("beat", "schedule must be MODULE:SCHEDULE (e.g. myapp.beat:schedule), not 'beat'"),
        ("beat:nothing", "'beat' has no attribute 'nothing'"),
        ("beat:not_a_schedule", "beat:not_a_schedule is a int, not a pgque.core.Schedule"),
        ("beat:empty", "beat:empty has no entries"),
        ("nowhere:schedule", "cannot import 'nowhere'"),
    ],
)
@pytest.mark.parametrize("command", ["schedules", "scheduler"])
def test_bad_schedule_specs_fail_in_one_line(
    command: str,
    spec: str,
    words: str,
    pgque: Run,
    folder: Path,
    error_line: Callable[[subprocess.CompletedProcess[str]], str],
) -> None:
    result = pgque(command, spec, "--url", "memory://", cwd=folder)
    assert words in error_line(result)


def test_scheduler_stops_on_sigterm_and_reports_its_count(folder: Path) -> None:
    script = str(Path(sys.executable).parent / "pgque")
    process = subprocess.Popen(
        [script, "scheduler", "beat:schedule", "--url", "memory://", "--name", "solo"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 30
        for line in process.stderr:  # pragma: no branch - the line comes or the test times out
            if "scheduler solo started" in line or time.monotonic() > deadline:
                break
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "scheduler solo stopped" in err
    assert set(json.loads(out)) == {"published"}
