"""A demo worker process stops once its demo is gone, even when the demo died while the
worker was still starting (before it began to watch): the demo's pid comes from the spawn,
not from ``getppid()`` read after the demo had gone."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from pgque.core.cli._demo_worker import _stop_when_orphaned

pytestmark = pytest.mark.timeout(120)


def _late_watcher(out: str) -> None:  # pragma: no cover - runs in a grandchild process
    """Wait until the spawning process is gone, then watch it as a demo worker does."""
    spawner = multiprocessing.parent_process()
    assert spawner is not None
    spawner.join(30)  # the process that started this one has exited: this one is adopted
    stop = threading.Event()
    _stop_when_orphaned(stop)
    Path(out).write_text("stopped" if stop.wait(10) else "still running")


def _short_lived_demo(out: str) -> None:  # pragma: no cover - runs in a child process
    """Start a worker process and exit at once, as a demo killed mid-start."""
    context = multiprocessing.get_context("spawn")
    context.Process(target=_late_watcher, args=(out,)).start()
    os._exit(0)  # gone at once, as if killed: no wait for the worker at exit


def test_a_worker_started_by_a_demo_that_is_already_gone_stops(tmp_path: Path) -> None:
    out = tmp_path / "watch.txt"
    context = multiprocessing.get_context("spawn")
    demo = context.Process(target=_short_lived_demo, args=(str(out),))
    demo.start()
    demo.join(60)
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert out.read_text() == "stopped"
