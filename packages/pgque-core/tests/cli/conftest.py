"""Fixtures of the command-line tests: run the real ``pgque`` console script in a subprocess.

The script is the one installed next to this interpreter (the session's virtual environment),
run with every ``PGQUE_*`` variable removed and in an empty working directory, so no settings
leak in from the machine running the tests. ``cli``, ``url`` and ``queue`` run the command
line's entry function in this process instead, on a named in-memory store that ``queue``
publishes to.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _in_process import Cli, Result

from pgque.core import InMemoryTransport, connect
from pgque.core.cli._app import run as run_cli

Run = Callable[..., subprocess.CompletedProcess[str]]


def _script() -> Path:
    folder = Path(sys.executable).parent
    for name in ("pgque", "pgque.exe"):
        if (folder / name).exists():
            return folder / name
    raise AssertionError(f"the pgque console script is not installed in {folder}")


@pytest.fixture
def clean_env() -> dict[str, str]:
    """Return this process's environment without any PGQUE_* variable."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PGQUE_")}


@pytest.fixture
def pgque(tmp_path: Path, clean_env: dict[str, str]) -> Run:
    """Return ``run(*args, env=None, cwd=None, timeout=60)`` running the console script."""
    script = str(_script())

    def run(
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 60,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *args],
            capture_output=True,
            text=True,
            env={**clean_env, **(env or {})},
            cwd=cwd or tmp_path,
            timeout=timeout,
            input=stdin,
            check=False,
        )

    return run


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pgque: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def error_line() -> Callable[[subprocess.CompletedProcess[str]], str]:
    """Return a check: the run failed with exactly one ``pgque: error:`` line; return it."""
    return _one_error_line


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Return the URL of a fresh named memory store; no PGQUE_* setting or .env applies, and
    tables are 200 columns wide (no column is cut)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    for name in ("PGQUE_URL", "PGQUE_QUEUE", "PGQUE_MAX_ATTEMPTS", "PGQUE_ON_EXHAUSTED"):
        monkeypatch.delenv(name, raising=False)
    return f"memory://cli-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def queue(url: str) -> Iterator[InMemoryTransport]:
    """Return a transport on the store of *url*, the one the commands see."""
    with connect(url) as transport:
        assert isinstance(transport, InMemoryTransport)
        yield transport


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], url: str) -> Cli:
    """Return ``cli(*args)``: run ``pgque *args --url URL`` in this process."""

    def call(*args: str) -> Result:
        code = run_cli([*args, "--url", url])
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return call
