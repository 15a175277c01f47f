"""Commands other distributions contribute to ``pgque`` (entry-point group
``pgque.cli_commands``): listed, loaded when run, inside the one error boundary; a broken one
fails in one line; a missing known one names the package to install.

The real console script runs with test-only commands (tests/cli/command_plugin) registered
through a generated ``.dist-info`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

Run = Callable[..., subprocess.CompletedProcess[str]]
Check = Callable[[subprocess.CompletedProcess[str]], str]

PLUGIN = Path(__file__).parent / "command_plugin"

ENTRIES = {
    "hello": "pgque_command_plugin:hello",
    "failing": "pgque_command_plugin:failing",
    "not-a-command": "pgque_command_plugin:not_a_command",
    "broken": "pgque_no_such_module:hello",
    "stats": "pgque_command_plugin:stats",
}


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    """Return the environment in which the console script finds the test commands."""
    site = tmp_path / "site"
    info = site / "pgque_command_plugin-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pgque-command-plugin\nVersion: 0\n", encoding="utf-8"
    )
    lines = "".join(f"{name} = {value}\n" for name, value in ENTRIES.items())
    (info / "entry_points.txt").write_text(f"[pgque.cli_commands]\n{lines}", encoding="utf-8")
    return {"PYTHONPATH": os.pathsep.join([str(PLUGIN), str(site)])}


def test_contributed_commands_are_listed(pgque: Run, plugin_env: dict[str, str]) -> None:
    result = pgque("--help", env=plugin_env)
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("Commands:", 1)[1]
    assert "hello" in listed
    assert "Say hello to NAME" in listed
    assert "broken" in listed
    assert "Unavailable (failed to load)" in listed
    assert "publish" in listed  # pgque's own commands are still there


def test_a_contributed_command_runs(pgque: Run, plugin_env: dict[str, str]) -> None:
    result = pgque("hello", "--name", "seams", "--url", "memory://", "-q", "q1", env=plugin_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello seams on q1"
    helped = pgque("hello", "--help", env=plugin_env)
    assert helped.returncode == 0
    assert helped.stdout.startswith("Usage: pgque hello")


@pytest.mark.parametrize(
    ("how", "code", "words"),
    [
        ("cli", 3, "the contributed command failed"),
        ("pgque", 1, "cannot reach the contributed server"),
        ("bug", 1, "unexpected RuntimeError: a bug in the contributed command"),
    ],
)
def test_a_contributed_command_fails_inside_the_error_boundary(
    pgque: Run, error_line: Check, plugin_env: dict[str, str], how: str, code: int, words: str
) -> None:
    result = pgque("failing", "--how", how, env=plugin_env)
    assert words in error_line(result)
    assert result.returncode == code


def test_a_bad_option_of_a_contributed_command_is_a_usage_error(
    pgque: Run, error_line: Check, plugin_env: dict[str, str]
) -> None:
    result = pgque("failing", "--how", "never", env=plugin_env)
    assert "(see `pgque failing --help`)" in error_line(result)
    assert result.returncode == 2


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("broken", "pgque broken (pgque_no_such_module:hello) failed to load: ModuleNotFound"),
        ("not-a-command", "did not give a click command"),
    ],
)
def test_a_command_that_cannot_load_fails_in_one_line(
    pgque: Run, error_line: Check, plugin_env: dict[str, str], name: str, words: str
) -> None:
    for args in ([name], [name, "--help"], [name, "--url", "memory://", "extra"]):
        result = pgque(*args, env=plugin_env)
        assert words in error_line(result)
        assert result.returncode == 1


def test_a_contributed_command_cannot_replace_a_builtin(
    pgque: Run, plugin_env: dict[str, str]
) -> None:
    result = pgque("stats", "--help", env=plugin_env)
    assert result.returncode == 0, result.stderr
    assert "Show a queue's counts" in result.stdout  # pgque's own stats
    assert "impostor" not in result.stdout + result.stderr


def test_a_missing_known_command_names_its_package(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    """Without pgque-postgres (its entry points hidden), ``pgque install`` says what to install
    and exits 2, a usage error (pgque-dashboard's tests check its commands the same way)."""
    code = textwrap.dedent(
        """
        import importlib.metadata as metadata
        import sys

        found = metadata.entry_points

        def without_commands(**params):
            if params.get("group") == "pgque.cli_commands":
                return metadata.EntryPoints(())
            return found(**params)

        metadata.entry_points = without_commands
        from pgque.core.cli import main

        main(sys.argv[1:])
        """
    )
    for args in (["install", "--url", "memory://"], ["migrate", "--help"]):
        result = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            env=clean_env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2, result
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"pgque: error: pgque {args[0]} comes with pgque-postgres")
        assert "pip install pgque-postgres" in lines[0]
    listing = subprocess.run(
        [sys.executable, "-c", code, "--help"],
        capture_output=True,
        text=True,
        env=clean_env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert listing.returncode == 0
    assert "Needs pgque-postgres (not installed)" in listing.stdout


def test_pgque_core_imports_no_web_library_nor_the_dashboard() -> None:
    """The command line lists `pgque dashboard` without loading pgque-dashboard or its web
    libraries: they are imported when the command runs."""
    code = (
        "import sys, pgque.core, pgque.core.explain, pgque.core.cli._app\n"
        "names = ('starlette', 'jinja2', 'uvicorn', 'multipart', 'pgque.dashboard')\n"
        "bad = [m for m in names if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
