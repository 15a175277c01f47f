"""Delayed messages from the command line (issue 29, F): ``publish --delay/--at``,
``scheduled`` and ``cancel``, through the console script against the test PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone

import pytest

from pgque.core import Event, Transport, connect
from pgque.core.cli._delayed import parse_delay

Run = Callable[..., subprocess.CompletedProcess[str]]
Check = Callable[[subprocess.CompletedProcess[str]], str]


@pytest.fixture
def queue_url(postgres_url: str) -> Iterator[str]:
    """The test server's URL with a fresh queue, purged afterwards."""
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}queue=cli_delay_{uuid.uuid4().hex[:10]}"
    yield url
    with connect(url) as transport:
        transport.purge()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("90", 90.0),
        ("1.5", 1.5),
        ("0.5m", 30.0),
        (" 10S ", 10.0),
    ],
)
def test_delay_units(text: str, seconds: float) -> None:
    assert parse_delay(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "s", "5x", "-3", "1w", "3 s", "nan", "inf", "0", "0s", "400d"]
)
def test_bad_delays_are_usage_errors(pgque: Run, error_line: Check, text: str) -> None:
    result = pgque("publish", "g", "k", "--delay", text, "--url", "memory://")
    assert result.returncode == 2
    assert "--delay" in error_line(result)


def _scheduled(transport: Transport) -> dict[int, float]:
    return {m.id: m.due_at for m in transport.scheduled()}


def test_publish_with_a_delay_schedules_the_message(pgque: Run, queue_url: str) -> None:
    before = time.time()
    result = pgque("publish", "order-42", "reminder", "--delay", "2h", "--url", queue_url)
    assert result.returncode == 0, result.stderr
    message_id = int(result.stdout.strip())
    with connect(queue_url) as transport:
        due = _scheduled(transport)[message_id]
        assert before + 7200 - 5 < due < time.time() + 7200 + 5
        assert transport.claim() is None


def test_publish_at_a_time_with_a_zone(pgque: Run, queue_url: str) -> None:
    when = (datetime.now(timezone.utc) + timedelta(days=2)).replace(microsecond=0)
    z_form = when.strftime("%Y-%m-%dT%H:%MZ")  # minutes, zone "Z"
    first = pgque("publish", "g", "k", "--at", z_form, "--url", queue_url)
    assert first.returncode == 0, first.stderr
    berlin = when.replace(second=0).astimezone(timezone(timedelta(hours=1)))
    second = pgque("publish", "g", "k", "--at", berlin.isoformat(), "--url", queue_url)
    assert second.returncode == 0, second.stderr
    with connect(queue_url) as transport:
        due = _scheduled(transport)
    target = when.replace(second=0).timestamp()
    assert abs(due[int(first.stdout)] - target) < 1.0
    assert abs(due[int(second.stdout)] - target) < 1.0


@pytest.mark.parametrize(
    "args",
    [
        ("--at", "2030-12-24T09:00"),  # no zone
        ("--at", "christmas"),
        ("--at", "2001-01-01T00:00Z"),  # in the past
        ("--delay", "30s", "--at", "2030-12-24T09:00Z"),  # both
    ],
)
def test_bad_at_is_a_usage_error(
    pgque: Run, error_line: Check, queue_url: str, args: tuple[str, ...]
) -> None:
    result = pgque("publish", "g", "k", *args, "--url", queue_url)
    assert result.returncode == 2
    error_line(result)
    with connect(queue_url) as transport:
        assert transport.scheduled() == []


def test_scheduled_lists_and_pages(pgque: Run, error_line: Check, queue_url: str) -> None:
    with connect(queue_url) as transport:
        ids = [transport.publish(f"g{n}", Event(kind=f"k{n}"), delay=600 + n) for n in range(3)]
        transport.publish("now", Event(kind="ordinary"))
    result = pgque("scheduled", "--json", "--limit", "2", "--url", queue_url)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["id"] for row in rows] == ids[:2]
    assert rows[0]["group_id"] == "g0"
    assert rows[0]["kind"] == "k0"
    assert rows[0]["due_at"].endswith("+00:00")
    assert f"--after {ids[1]}" in result.stderr
    result = pgque("scheduled", "--json", "--after", str(ids[1]), "--url", queue_url)
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == [ids[2]]
    table = pgque("scheduled", "--url", queue_url)
    assert table.returncode == 0, table.stderr
    for n, message_id in enumerate(ids):
        assert str(message_id) in table.stdout
        assert f"g{n}" in table.stdout


def test_cancel(pgque: Run, error_line: Check, queue_url: str) -> None:
    with connect(queue_url) as transport:
        later = transport.publish("g", Event(kind="k"), delay=600)
        ordinary = transport.publish("g", Event(kind="k"))
    result = pgque("cancel", str(later), "--url", queue_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"cancelled scheduled message {later}"
    again = pgque("cancel", str(later), "--url", queue_url)
    assert again.returncode == 1
    assert f"message {later}" in error_line(again)
    assert pgque("cancel", str(ordinary), "--url", queue_url).returncode == 1
    with connect(queue_url) as transport:
        assert transport.scheduled() == []
        assert transport.stats().messages == 1
