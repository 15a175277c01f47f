"""tools/busy.py runs a command beside spinning processes and stops them after it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BUSY = Path(__file__).resolve().parents[1] / "busy.py"


def test_the_command_runs_beside_busy_cores_and_its_status_is_kept() -> None:
    # The command sees the spinners (its CPU time is shared with them: it reports their count
    # from /proc, children of busy.py, while it runs) and its exit status comes back.
    probe = (
        "import os, sys\n"
        "parent = os.getppid()\n"
        "kids = [p for p in os.listdir('/proc') if p.isdigit()\n"
        "        and open(f'/proc/{p}/stat').read().split(')')[1].split()[1] == str(parent)]\n"
        "print(len(kids))\n"
        "sys.exit(3)\n"
    )
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, str(BUSY), "--cores", "2", "--", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 3, run.stderr
    # busy.py's children: the two spinners and the probe itself
    assert run.stdout.strip().splitlines()[-1] == "3", run.stdout
    assert time.monotonic() - started < 30  # the spinners did not outlive the command


def test_a_missing_command_is_refused() -> None:
    run = subprocess.run([sys.executable, str(BUSY)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 2
    assert "command" in run.stderr
