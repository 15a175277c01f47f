"""Fixtures of the command-line tests: run the real ``pgque`` console script in a subprocess.

The script is the one installed next to this interpreter (the session's virtual environment),
run with every ``PGQUE_*`` variable removed and in an empty working directory, so no settings
leak in from the machine running the tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

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
