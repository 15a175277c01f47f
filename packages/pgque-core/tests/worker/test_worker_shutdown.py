"""Stopping a worker: graceful, after the grace period, at once; by stop() and by real
signals sent to a real worker process."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _worker_helpers import KINDS, make_transport, make_worker, run

from pgque.core import Event, InMemoryTransport, MemoryStore

pytestmark = pytest.mark.timeout(30)

SCRIPT = Path(__file__).with_name("_signal_worker.py")


class WorkerProcess:
    """A worker running ``_signal_worker.py`` in a child process; stdout read by a thread."""

    def __init__(self, kind: str, handler_s: float, grace: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), kind, str(handler_s), str(grace)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.errors: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.error_reader = threading.Thread(target=self._read_errors, daemon=True)
        self.error_reader.start()

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self.errors.extend(self.proc.stderr)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def wait_for(self, prefix: str, count: int, timeout: float = 15.0) -> None:
        """Read stdout until *count* lines start with *prefix*."""
        deadline = time.monotonic() + timeout
        while sum(line.startswith(prefix) for line in self.seen) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"timed out waiting for {prefix}: {self.seen}"
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            assert line is not None, f"worker exited early: {self.seen}"
            self.seen.append(line)

    def wait_for_log(self, text: str, timeout: float = 15.0) -> None:
        """Wait until the worker's log (stderr) holds *text*."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in list(self.errors)):
            assert time.monotonic() < deadline, f"timed out waiting for {text!r} in the log"
            time.sleep(0.01)

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = 15.0) -> dict[str, Any]:
        """Wait for exit (code 0) and return the JSON summary it printed last."""
        self.proc.wait(timeout)
        self.reader.join(timeout)
        self.error_reader.join(timeout)
        while (line := self.lines.get()) is not None:
            self.seen.append(line)
        self.close()
        assert self.proc.returncode == 0, "".join(self.errors)
        summary: dict[str, Any] = json.loads(self.seen[-1])
        return summary

    def close(self) -> None:
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        self.error_reader.join(5)
        self.close()


@pytest.fixture
def spawn() -> Any:
    procs: list[WorkerProcess] = []

    def start(kind: str, handler_s: float, grace: float) -> WorkerProcess:
        proc = WorkerProcess(kind, handler_s, grace)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("kind", KINDS)
def test_sigterm_lets_in_flight_handlers_finish_and_claims_no_more(kind: str, spawn: Any) -> None:
    worker = spawn(kind, handler_s=1.2, grace=10.0)
    worker.wait_for("STARTED", 2)
    worker.signal(signal.SIGTERM)
    summary = worker.finish()
    report, stats = summary["report"], summary["stats"]
    assert sum(line.startswith("DONE") for line in worker.seen) == 2
    # two ran and were acked; the leases that waited in the buffer (prefetch: one or two,
    # by how the slots' first calls met) were given back unhandled
    assert report["acked"] == 2
    assert 3 <= report["claimed"] <= 4
    assert report["released"] == report["claimed"] - 2
    assert (stats["messages"], stats["in_flight"]) == (4, 0)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_async_handlers_past_the_grace_period_are_stopped_and_released(spawn: Any) -> None:
    worker = spawn("async", handler_s=20.0, grace=0.3)
    worker.wait_for("STARTED", 2)
    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    summary = worker.finish()
    assert time.monotonic() - signalled < 5.0
    report, stats = summary["report"], summary["stats"]
    # the two running (cancelled), and the one or two that waited in the buffer
    assert report["acked"] == 0
    assert report["released"] == report["claimed"] >= 3
    # released without delay: nothing in flight, nothing parked, all six still there
    assert (stats["messages"], stats["in_flight"], stats["parked"]) == (6, 0, 0)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_thread_handlers_past_the_grace_period_keep_their_leases_until_they_return(
    spawn: Any,
) -> None:
    """A thread cannot be stopped: past the grace its lease is kept, and run() waits; the
    handler's own outcome (an ack) is settled when it returns. No other worker could have
    taken its group meanwhile."""
    worker = spawn("sync", handler_s=1.5, grace=0.2)
    worker.wait_for("STARTED", 2)
    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    summary = worker.finish()
    assert time.monotonic() - signalled >= 1.0  # it waited for the two threads
    report, stats = summary["report"], summary["stats"]
    assert sum(line.startswith("DONE") for line in worker.seen) == 2
    assert report["acked"] == 2
    assert report["released"] == report["claimed"] - 2  # the buffered ones
    assert (stats["messages"], stats["in_flight"], stats["parked"]) == (4, 0, 0)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("kind", KINDS)
def test_a_second_signal_stops_at_once_and_a_third_leaves_threads_behind(
    kind: str, spawn: Any
) -> None:
    """Asyncio handlers stop at the second signal. Threads cannot: a third signal makes the
    worker return without them, their leases left to expire (counted lost; the expiry counts
    an attempt: the handler may have acted, or hang for good)."""
    worker = spawn(kind, handler_s=20.0, grace=60.0)
    worker.wait_for("STARTED", 2)
    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    time.sleep(0.2)
    worker.signal(signal.SIGINT)
    if kind == "sync":
        worker.wait_for_log("cannot be stopped", 5)
        worker.signal(signal.SIGINT)
    summary = worker.finish()
    assert time.monotonic() - signalled < 5.0
    report, stats = summary["report"], summary["stats"]
    if kind == "async":
        # the two running, and the one or two that waited in the buffer
        assert report["released"] == report["claimed"] >= 3
        assert stats["in_flight"] == 0
    else:
        assert report["lost"] == 2  # the two threads' leases, left to expire
        assert report["released"] == report["claimed"] - 2
        assert stats["in_flight"] == 2


def _publish(store: MemoryStore, n: int) -> InMemoryTransport:
    queue = InMemoryTransport(store=store)
    for i in range(n):
        queue.publish(f"g{i}", Event(kind="k"))
    return queue


def _sleeping(kind: str, seconds: float, started: threading.Event) -> Any:
    if kind == "sync":

        def handler(event: Event) -> None:
            started.set()
            time.sleep(seconds)

        return handler
    import asyncio

    async def async_handler(event: Event) -> None:
        started.set()
        await asyncio.sleep(seconds)

    return async_handler


def _run_in_thread(worker: Any) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(run(worker, stop_when_idle=False)))
    thread.start()
    return thread, result


@pytest.mark.parametrize("kind", KINDS)
def test_stop_from_another_thread_is_graceful(kind: str) -> None:
    store = MemoryStore()
    queue = _publish(store, 3)
    started = threading.Event()
    worker = make_worker(kind, make_transport(kind, store), _sleeping(kind, 0.3, started))
    thread, result = _run_in_thread(worker)
    assert started.wait(5)
    worker.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert (result[0].acked, result[0].released, result[0].claimed) == (1, 0, 1)
    assert queue.stats().messages == 2
    assert not worker.running


@pytest.mark.parametrize("kind", KINDS)
def test_stop_not_graceful_stops_in_flight_handlers(kind: str) -> None:
    """An asyncio handler is cancelled and its message released at once. A thread cannot be
    stopped: run() waits for it, its lease kept; a second stop(graceful=False) returns without
    it, the lease left to expire (counted lost)."""
    store = MemoryStore()
    queue = _publish(store, 3)
    started = threading.Event()
    worker = make_worker(
        kind, make_transport(kind, store), _sleeping(kind, 5.0, started), shutdown_grace=30
    )
    thread, result = _run_in_thread(worker)
    assert started.wait(5)
    begun = time.monotonic()
    worker.stop(graceful=False)
    if kind == "sync":
        thread.join(0.5)
        assert thread.is_alive()  # waiting for the thread, which cannot be stopped
        assert queue.stats().in_flight == 1
        worker.stop(graceful=False)  # again: leave it behind
    thread.join(5)
    assert time.monotonic() - begun < 2.0
    stats = queue.stats()
    if kind == "sync":
        assert (result[0].lost, result[0].released, result[0].acked) == (1, 0, 0)
        assert (stats.messages, stats.in_flight) == (3, 1)  # its lease, left to expire
    else:
        assert (result[0].released, result[0].acked) == (1, 0)
        assert (stats.messages, stats.in_flight) == (3, 0)


@pytest.mark.parametrize("kind", KINDS)
def test_stop_before_run_makes_run_return_at_once(kind: str) -> None:
    store = MemoryStore()
    queue = _publish(store, 2)
    worker = make_worker(kind, make_transport(kind, store), _sleeping(kind, 0, threading.Event()))
    worker.stop()
    report = run(worker, stop_when_idle=False)
    assert report.claimed == 0
    assert queue.stats().messages == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_worker_cannot_run_twice_at_once(kind: str) -> None:
    store = MemoryStore()
    started = threading.Event()
    _publish(store, 1)
    worker = make_worker(kind, make_transport(kind, store), _sleeping(kind, 0.2, started))
    thread, _result = _run_in_thread(worker)
    assert started.wait(5)
    from pgque.core import PgqueError

    with pytest.raises(PgqueError, match="already running"):
        run(worker)
    worker.stop()
    thread.join(5)
