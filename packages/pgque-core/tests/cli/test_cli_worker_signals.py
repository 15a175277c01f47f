"""The exit status of ``pgque worker`` after a stop signal (issue 29, C): 130 after SIGINT
(Ctrl-C, as the shell reports an interrupted command), 0 after SIGTERM (a service manager's
ordinary stop), the report printed either way. Real subprocesses, real signals, the test
PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)


def _start(tmp_path: Path, env: dict[str, str], url: str, *args: str) -> subprocess.Popen[str]:
    (tmp_path / "cli_sig.py").write_text("def handle(event):\n    pass\n")
    script = str(Path(sys.executable).parent / "pgque")
    return subprocess.Popen(
        [script, "worker", "cli_sig:handle", "--url", url, "--log-level", "INFO", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_started(proc: subprocess.Popen[str], needed: int = 1) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    started = 0
    while started < needed:
        line = proc.stderr.readline()
        assert line or proc.poll() is None, "the worker exited early"
        assert time.monotonic() < deadline, "the worker did not start"
        if " started on queue " in line:  # logged by each worker once it runs
            started += 1


def _stop(proc: subprocess.Popen[str], signum: int) -> tuple[str, str]:
    try:
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out, err


@pytest.fixture
def url(postgres_url: str) -> str:
    sep = "&" if "?" in postgres_url else "?"
    return f"{postgres_url}{sep}queue=cli_sig_{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["SIGINT", "SIGTERM"]
)
@pytest.mark.parametrize("flavour", [[], ["--asyncio"]], ids=["threads", "asyncio"])
def test_exit_status_after_a_stop_signal(
    tmp_path: Path,
    clean_env: dict[str, str],
    url: str,
    signum: int,
    code: int,
    flavour: list[str],
) -> None:
    proc = _start(tmp_path, clean_env, url, *flavour)
    _wait_started(proc)
    out, err = _stop(proc, signum)
    assert proc.returncode == code, err
    report = json.loads(out.strip().splitlines()[-1])  # the report is printed all the same
    assert report["claimed"] == 0
    assert "Traceback" not in err
    assert "pgque: error" not in err


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["SIGINT", "SIGTERM"]
)
def test_exit_status_of_several_processes(
    tmp_path: Path, clean_env: dict[str, str], url: str, signum: int, code: int
) -> None:
    proc = _start(tmp_path, clean_env, url, "--processes", "2")
    _wait_started(proc, needed=2)
    out, err = _stop(proc, signum)
    assert proc.returncode == code, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["processes"] == 2
    assert "exited with code" not in err  # the processes themselves ended cleanly
