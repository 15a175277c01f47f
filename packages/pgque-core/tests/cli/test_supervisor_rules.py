"""The supervisor's give-up rules, without processes (``pgque worker --processes``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from pgque.core.cli._supervisor import DeathRecord


def test_an_error_exit_soon_after_the_start_gives_up_at_once() -> None:
    rules = DeathRecord(allowed=5, window_s=60, start_s=5)
    verdict = rules.verdict(now=100.0, lived_s=1.0, returncode=1)
    assert verdict is not None
    assert "not restarting" in verdict


def test_a_signal_or_a_late_error_is_restarted() -> None:
    rules = DeathRecord(allowed=5, window_s=60, start_s=5)
    assert rules.verdict(now=100.0, lived_s=1.0, returncode=-9) is None  # killed: restart
    assert rules.verdict(now=101.0, lived_s=30.0, returncode=1) is None


def test_too_many_deaths_within_the_window_give_up() -> None:
    rules = DeathRecord(allowed=2, window_s=10, start_s=5)
    assert rules.verdict(now=0.0, lived_s=6, returncode=-9) is None
    assert rules.verdict(now=5.0, lived_s=6, returncode=-9) is None
    verdict = rules.verdict(now=9.0, lived_s=6, returncode=-9)
    assert verdict is not None
    assert "died 3 times within 10 s" in verdict


def test_deaths_older_than_the_window_are_forgotten() -> None:
    rules = DeathRecord(allowed=2, window_s=10, start_s=5)
    for now in (0.0, 5.0, 10.5, 16.0, 21.0, 26.5):
        assert rules.verdict(now=now, lived_s=6, returncode=-9) is None


#: A worker process stand-in: SIGTERM stays blocked (so signals sent meanwhile merge into one
#: pending signal, as they do when they arrive faster than the interpreter handles them) until
#: the file "unblock" exists; the first SIGTERM it then handles is logged, the second exits 0.
_MERGING_CHILD = """
import os, signal, sys, time
from pathlib import Path

here = Path(sys.argv[1])
seen = []
def on_term(signum, frame):
    seen.append(signum)
    if len(seen) >= 2:
        os._exit(0)
signal.signal(signal.SIGTERM, on_term)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
(here / "ready").touch()
while not (here / "unblock").exists():
    time.sleep(0.01)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    time.sleep(0.01)
os._exit(3)
"""

_SUPERVISOR = """
import sys
from pgque.core.cli._supervisor import supervise
supervise([sys.executable, sys.argv[1], sys.argv[2]], 1, shutdown_grace=30.0, stop_when_idle=True)
"""


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_second_signal_reaches_a_process_that_merged_both(tmp_path: Path) -> None:
    """Two signals forwarded before the worker process handled the first arrive as one; the
    supervisor sends the second again until the process stops, so it still stops at once
    (here: well before --shutdown-grace + the kill margin)."""
    child = tmp_path / "child.py"
    child.write_text(_MERGING_CHILD)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SUPERVISOR, str(child), str(tmp_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        _wait_for("the worker process", (tmp_path / "ready").exists)
        proc.send_signal(signal.SIGTERM)
        _wait_for_line(proc.stderr, "received SIGTERM: stopping 1 worker processes")
        proc.send_signal(signal.SIGTERM)
        # Logged after both were forwarded: the child holds them merged into one.
        _wait_for_line(proc.stderr, "received SIGTERM again")
        began = time.monotonic()
        (tmp_path / "unblock").touch()
        assert proc.wait(timeout=9) == 0
        assert time.monotonic() - began < 5
    finally:
        proc.kill()
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _wait_for_line(stream: IO[str], text: str) -> None:
    for line in stream:
        if text in line:
            return
    raise AssertionError(f"the supervisor ended before logging {text!r}")
