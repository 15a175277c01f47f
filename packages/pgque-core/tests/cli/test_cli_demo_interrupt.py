"""``pgque demo`` interrupted leaves no process behind (issue 29, G).

The demo runs as a real subprocess on the test PostgreSQL; once its worker processes run, it
is interrupted (SIGINT to the demo alone, as ``kill -INT``, and to its whole process group, as
Ctrl-C in a terminal; SIGTERM; SIGHUP, a closed terminal) or killed (SIGKILL); afterwards
none of the processes it started may remain.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        sys.platform != "linux", reason="finds the demo's processes in /proc (Linux only)"
    ),
]


def _children(pid: int) -> set[int]:
    """Every live descendant of *pid* (from /proc; zombies count as gone)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("State", "").startswith("Z"):
            continue
        parents[int(entry.name)] = int(fields.get("PPid", "0").strip())
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


#: (signal, to the whole process group, the demo's exit status; None: not checked)
STOPS = {
    "kill-INT": (signal.SIGINT, False, 130),
    "ctrl-C": (signal.SIGINT, True, 130),
    "kill-TERM": (signal.SIGTERM, False, 130),
    "hang-up": (signal.SIGHUP, False, 130),
    "kill-9": (signal.SIGKILL, False, -signal.SIGKILL),  # its workers notice it is gone
}


def _as_from_a_terminal() -> None:
    """Start the demo with SIGINT at its default, as a shell at a terminal does: an ignored
    SIGINT is inherited through exec (a test runner's worker process may ignore it), and
    Python then leaves Ctrl-C ignored in the demo too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop", list(STOPS))
def test_an_interrupted_demo_leaves_no_process_behind(
    postgres_url: str, tmp_path: Path, clean_env: dict[str, str], stop: str
) -> None:
    signum, group, code = STOPS[stop]
    script = str(Path(sys.executable).parent / "pgque")
    err_file = (tmp_path / "demo.err").open("w")
    proc = subprocess.Popen(
        [script, "demo", "--url", postgres_url, "--events", "500000", "--groups", "50",
         "--workers", "3", "--work-ms", "1"],
        cwd=tmp_path, env=clean_env, stdout=subprocess.DEVNULL,
        stderr=err_file, start_new_session=True, preexec_fn=_as_from_a_terminal,
    )  # fmt: skip
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while len(started) < 3 and time.monotonic() < deadline:  # the three workers run
            assert proc.poll() is None, (tmp_path / "demo.err").read_text()
            started |= _children(proc.pid)
            time.sleep(0.2)
        assert len(started) >= 3, started
        time.sleep(2.0)  # mid-run: publishing and draining
        started |= _children(proc.pid)
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        err_file.close()
    assert proc.returncode == code, (tmp_path / "demo.err").read_text()
    # A worker process sees its demo gone within half a second, then stops gracefully and
    # closes its transport: seconds on a busy machine, so the bound is generous.
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [(p, _cmdline(p)) for p in started if _alive(p)]
    for p, _ in left:
        os.kill(p, signal.SIGKILL)
    assert left == []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
