"""The console script itself: help on every command, configuration sources, one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Check = Callable[[subprocess.CompletedProcess[str]], str]

COMMANDS = [
    [],
    ["demo"],
    ["worker"],
    ["publish"],
    ["stats"],
    ["dead-letters"],
    ["dead-letters", "list"],
    ["dead-letters", "redrive"],
    ["dead-letters", "show"],
    ["dead-letters", "delete"],
    ["groups"],
    ["group"],
    ["pause"],
    ["resume"],
    ["unblock"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "pgque")
def test_every_command_has_help(
    pgque: Callable[..., subprocess.CompletedProcess[str]], command: list[str]
) -> None:
    result = pgque(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: pgque"), result.stdout
    assert result.stderr == ""


def test_version(pgque: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    result = pgque("--version")
    assert result.returncode == 0
    assert "pgque" in result.stdout


def test_no_url_is_one_line(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check
) -> None:
    assert "PGQUE_URL" in error_line(pgque("stats"))


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("not-a-url", "not a queue URL"),
        ("bogus://host/x", "unknown queue URL scheme 'bogus'"),
    ],
)
def test_bad_url_is_one_line(
    pgque: Callable[..., subprocess.CompletedProcess[str]],
    error_line: Check,
    url: str,
    expected: str,
) -> None:
    result = pgque("stats", "--url", url)
    assert expected in error_line(result)
    assert result.returncode == 1


def test_server_down_is_one_line_without_password(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check
) -> None:
    pytest.importorskip("pgque.postgres", reason="pgque-postgres is not installed")
    result = pgque(
        "stats", "--url", "postgresql://someone:s3cret-pw@127.0.0.1:1/x?timeout=2", timeout=30
    )
    assert "127.0.0.1" in error_line(result)
    assert result.returncode == 1
    assert "s3cret-pw" not in result.stderr + result.stdout


def test_redis_down_is_one_line_without_password(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check
) -> None:
    pytest.importorskip("pgque.redis", reason="pgque-redis is not installed")
    result = pgque("stats", "--url", "redis://:s3cret-pw@127.0.0.1:1/0", timeout=30)
    error_line(result)
    assert "s3cret-pw" not in result.stderr + result.stdout


def test_invalid_json_is_one_line(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check
) -> None:
    line = error_line(pgque("publish", "g", "k", "{not json", "--url", "memory://"))
    assert "DATA_JSON is not valid JSON" in line


def test_invalid_event_is_one_line(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check
) -> None:
    error_line(pgque("publish", "", "k", "{}", "--url", "memory://"))


def test_usage_error_is_one_line_and_exits_2(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check
) -> None:
    result = pgque("publish", "--url", "memory://")
    assert "Missing argument" in error_line(result)
    assert result.returncode == 2
    result = pgque("publish", "g", "k", "--priority", "9", "--url", "memory://")
    assert result.returncode == 2
    error_line(result)


def test_invalid_setting_is_one_line(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check
) -> None:
    result = pgque("stats", env={"PGQUE_URL": "memory://", "PGQUE_MAX_ATTEMPTS": "many"})
    assert "PGQUE_MAX_ATTEMPTS" in error_line(result)


def _queue_named(result: subprocess.CompletedProcess[str]) -> str:
    """Return the queue a ``stats`` run on an empty memory:// queue names (never used)."""
    match = re.search(r"queue '([^']+)' has never been used on memory://", result.stderr)
    assert match is not None, result.stderr
    return match.group(1)


def test_url_and_queue_from_environment(
    pgque: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    result = pgque("stats", "--json", env={"PGQUE_URL": "memory://", "PGQUE_QUEUE": "from_env"})
    assert _queue_named(result) == "from_env"


def test_settings_from_dotenv(
    pgque: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("PGQUE_URL=memory://\nPGQUE_QUEUE=from_dotenv\n")
    result = pgque("stats", "--json")
    assert _queue_named(result) == "from_dotenv"


def test_flag_beats_dotenv(
    pgque: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("PGQUE_URL=memory://\nPGQUE_QUEUE=from_dotenv\n")
    result = pgque("stats", "--json", "--queue", "from_flag")
    assert _queue_named(result) == "from_flag"


def test_settings_from_env_file_option(
    pgque: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    other = tmp_path / "other.env"
    other.write_text("PGQUE_URL=memory://\nPGQUE_QUEUE=from_file\n")
    result = pgque("stats", "--json", "--env-file", str(other))
    assert _queue_named(result) == "from_file"


def test_missing_settings_file_is_one_line(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check, tmp_path: Path
) -> None:
    assert "not found" in error_line(pgque("stats", "--env-file", str(tmp_path / "nope.env")))


def test_unknown_handler_is_one_line(
    pgque: Callable[..., subprocess.CompletedProcess[str]], error_line: Check
) -> None:
    assert "cannot import" in error_line(
        pgque("worker", "no_such_module:handle", "--url", "memory://")
    )
    assert "MODULE:HANDLER" in error_line(pgque("worker", "no_colon", "--url", "memory://"))


def test_missing_cli_extra_names_the_extra(clean_env: dict[str, str], tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['click'] = None\n"
        "from pgque.core.cli import main\n"
        "main(['--help'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=clean_env,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "pip install 'pgque-core[cli]'" in result.stderr
