"""Two ``pgque scheduler`` processes on one queue, against PostgreSQL and Redis: each tick of a
one-second schedule is published exactly once, and when one is killed the other goes on with
no gap.

Each test runs the real console script twice (subprocesses: one blocking scheduler, one
asyncio), waits for a window of 20 ticks while both run, and reads the queue from this process.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from pgque.core import Transport, connect
from pgque.core.scheduling import TICK_HEADER

pytestmark = pytest.mark.timeout(120)

TICKS = 20
BEAT = textwrap.dedent(
    """
    from pgque.core import Schedule, ScheduleEntry

    schedule = Schedule(
        [ScheduleEntry(name="beat", cron="* * * * * *", group_id="beats", kind="beat")]
    )
    """
)


def _script() -> str:
    return str(Path(sys.executable).parent / "pgque")


@pytest.fixture(params=["postgres", "redis"])
def queue_url(request: pytest.FixtureRequest) -> str:
    """A fresh queue on PostgreSQL or Redis (the servers of the test run)."""
    base = str(request.getfixturevalue(f"{request.param}_url"))
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}queue=sched_{uuid.uuid4().hex[:12]}"


class Scheduler:
    """One ``pgque scheduler`` process; its stderr goes to a file."""

    def __init__(self, name: str, url: str, folder: Path, env: dict[str, str], *flags: str) -> None:
        self.name = name
        self.log = folder / f"{name}.log"
        self._err = self.log.open("w")
        self.process = subprocess.Popen(
            [_script(), "scheduler", "beat:schedule", "--url", url, "--name", name, *flags],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
        )

    def started(self) -> bool:
        return f"scheduler {self.name} started" in self.log.read_text()

    def stop(self) -> int:
        """SIGTERM it; return how many ticks it says it published (it must exit 0)."""
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=15)
        self._err.close()
        assert self.process.returncode == 0, self.log.read_text()
        published: int = json.loads(out.strip().splitlines()[-1])["published"]
        return published

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        self.ensure_gone()

    def ensure_gone(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._err.close()


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def _ticks(transport: Transport) -> list[float]:
    """Claim and ack every message; return their ticks in delivery (publish) order."""
    ticks: list[float] = []
    while (lease := transport.claim()) is not None:
        ticks.append(datetime.fromisoformat(lease.event.headers[TICK_HEADER]).timestamp())
        assert transport.ack(lease)
    return ticks


def _start_two(url: str, folder: Path) -> list[Scheduler]:
    (folder / "beat.py").write_text(BEAT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGQUE_")}
    # One blocking and one asyncio scheduler: both kinds take part in the races.
    pair = [
        Scheduler("sched-a", url, folder, env),
        Scheduler("sched-b", url, folder, env, "--asyncio"),
    ]
    _wait(lambda: all(s.started() for s in pair), 30, "both schedulers to start")
    return pair


def _wait_for_tick(transport: Transport, tick: float) -> None:
    def published() -> bool:
        last = transport.last_tick("beat")
        return last is not None and last >= tick

    _wait(published, tick - time.time() + 15, f"tick {tick}")


def test_two_scheduler_processes_publish_each_tick_once(queue_url: str, tmp_path: Path) -> None:
    pair = _start_two(queue_url, tmp_path)
    try:
        with connect(queue_url) as transport:
            first = math.ceil(time.time()) + 1  # both are running from here on
            window = [float(first + s) for s in range(TICKS)]
            _wait_for_tick(transport, window[-1] + 1)  # one more: the window is closed
            counts = [s.stop() for s in pair]
            ticks = _ticks(transport)
    finally:
        for s in pair:
            s.ensure_gone()
    inside = [t for t in ticks if window[0] <= t <= window[-1]]
    assert inside == window  # exactly 20 messages for the 20 ticks, each once, in order
    assert len(ticks) == len(set(ticks))  # no tick twice, before or after the window either
    assert ticks == [ticks[0] + s for s in range(len(ticks))]  # and none missing
    assert sum(counts) == len(ticks)  # what each process says it appended adds up


def test_killing_one_scheduler_leaves_no_gap(queue_url: str, tmp_path: Path) -> None:
    pair = _start_two(queue_url, tmp_path)
    victim, survivor = pair
    try:
        with connect(queue_url) as transport:
            first = math.ceil(time.time()) + 1
            window = [float(first + s) for s in range(TICKS)]
            _wait_for_tick(transport, window[TICKS // 3])
            victim.kill()  # SIGKILL, mid-run: no clean-up of any kind
            killed_at = time.time()
            _wait_for_tick(transport, window[-1] + 1)
            assert survivor.process.poll() is None, survivor.log.read_text()
            survivor_count = survivor.stop()
            ticks = _ticks(transport)
    finally:
        for s in pair:
            s.ensure_gone()
    inside = [t for t in ticks if window[0] <= t <= window[-1]]
    assert inside == window  # each tick exactly once across the kill, no gap
    assert len(ticks) == len(set(ticks))
    assert ticks == [ticks[0] + s for s in range(len(ticks))]
    after_kill = [t for t in ticks if t > killed_at]
    assert len(after_kill) >= TICKS // 2  # the survivor published every tick since
    assert survivor_count >= len(after_kill)
