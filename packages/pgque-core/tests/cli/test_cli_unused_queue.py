"""A typo'd queue name is not an empty queue (issue 29, A): the read commands say that the
queue has never been used and name the queues there, and ``pgque worker`` warns at start.

Through the console script against the test PostgreSQL and Redis (a ``memory://`` store lives
only in one process, so it reads as never used in every command: checked too).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgque.core import Event, Transport, connect

Run = Callable[..., subprocess.CompletedProcess[str]]
Check = Callable[[subprocess.CompletedProcess[str]], str]


@pytest.fixture(params=["postgres", "redis"])
def server_url(request: pytest.FixtureRequest) -> str:
    """The URL of the test PostgreSQL or Redis."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def used(server_url: str) -> Iterator[tuple[str, Transport]]:
    """A queue that holds one message, and its transport; purged afterwards."""
    name = f"cli_used_{uuid.uuid4().hex[:10]}"
    with connect(server_url, queue=name) as transport:
        transport.publish("g", Event(kind="k"))
        yield name, transport
        transport.purge()  # type: ignore[attr-defined]


def _typo() -> str:
    return f"cli_typo_{uuid.uuid4().hex[:10]}"


def _assert_never_used(line: str, typo: str, known: str | None) -> None:
    assert f"queue {typo!r} has never been used" in line, line
    if known is not None:
        assert "the queues there: " in line, line
        assert known in line.split("the queues there: ", 1)[1], line


READ_COMMANDS: list[tuple[str, ...]] = [
    ("stats",),
    ("stats", "--json"),
    ("groups",),
    ("groups", "--json"),
    ("groups", "--state", "blocked"),
    ("group", "g"),
    ("dead-letters", "list"),
    ("dead-letters", "list", "--json"),
    ("dead-letters", "show", "1"),
    ("scheduled",),
    ("scheduled", "--json"),
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_read_commands_refuse_a_queue_never_used(
    pgque: Run,
    error_line: Check,
    server_url: str,
    used: tuple[str, Transport],
    command: tuple[str, ...],
) -> None:
    typo = _typo()
    result = pgque(*command, "--url", server_url, "--queue", typo)
    assert result.returncode == 1
    assert result.stdout == ""
    _assert_never_used(error_line(result), typo, used[0])


def test_read_commands_still_work_on_a_used_queue(
    pgque: Run, server_url: str, used: tuple[str, Transport]
) -> None:
    name, transport = used
    for command in (("groups",), ("dead-letters", "list"), ("scheduled",), ("stats",)):
        result = pgque(*command, "--url", server_url, "--queue", name)
        assert result.returncode == 0, (command, result.stderr)
    # A queue holding only a scheduled message (its group not created yet) is used too.
    transport.ack(transport.claim())  # type: ignore[arg-type]
    transport.publish("later", Event(kind="k"), delay=3600)
    result = pgque("groups", "--url", server_url, "--queue", name)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "no groups"


def test_a_memory_queue_is_never_used_in_a_command(pgque: Run, error_line: Check) -> None:
    result = pgque("groups", "--url", "memory://")
    line = error_line(result)
    _assert_never_used(line, "default", None)
    assert "memory://" in line
    assert "only in the process" in line


def test_worker_warns_at_start_naming_the_known_queues(
    pgque: Run, server_url: str, used: tuple[str, Transport], tmp_path: Path
) -> None:
    (tmp_path / "cli_unused.py").write_text("def handle(event):\n    pass\n")
    typo = _typo()
    result = pgque(
        "worker", "cli_unused:handle", "--url", server_url, "--queue", typo, "--stop-when-idle"
    )
    assert result.returncode == 0, result.stderr  # it still runs
    warnings = [line for line in result.stderr.splitlines() if " WARNING " in line]
    assert len(warnings) == 1, result.stderr
    _assert_never_used(warnings[0], typo, used[0])
    assert json.loads(result.stdout.strip().splitlines()[-1])["claimed"] == 0
    # On a used queue: no such warning.
    result = pgque(
        "worker", "cli_unused:handle", "--url", server_url, "--queue", used[0], "--stop-when-idle"
    )
    assert result.returncode == 0, result.stderr
    assert "never been used" not in result.stderr
