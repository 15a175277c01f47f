"""``isolation="process"``: handlers in child processes, which the worker kills at the hard
timeout and at the end of the shutdown grace, so a hung handler never holds its group.

The handlers live in pgque.conformance.process_handlers (a child imports them by name); each
leaves a mark per start and end in a folder the test reads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _worker_helpers import KINDS, adds_up, make_transport, make_worker, run

from pgque.conformance import process_handlers as handlers
from pgque.core import (
    Event,
    InMemoryTransport,
    InvalidInput,
    MemoryStore,
    MetricsHooks,
    RetryPolicy,
    WorkerReport,
)

pytestmark = [pytest.mark.timeout(60)]
both = pytest.mark.parametrize("kind", KINDS)

NO_DELAY = RetryPolicy(base=0.01, max_delay=0.01, jitter=0.0)


def _queue(store: MemoryStore, folder: Path, *groups: str, **options: Any) -> InMemoryTransport:
    queue = InMemoryTransport(store=store, **options)
    for n, group in enumerate(groups):
        queue.publish(group, Event(kind="k", data={"dir": str(folder), "n": n}))
    return queue


def _wait_until(condition: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


@both
def test_a_hung_handler_process_is_killed_at_hard_timeout_until_max_attempts(
    kind: str, tmp_path: Path
) -> None:
    """Each attempt is killed at the hard timeout and counts: with max_attempts=2 the message
    is dead-lettered after two, and the next message of its group runs."""
    store = MemoryStore()
    queue = _queue(store, tmp_path, "g", "g", max_attempts=2)
    hooks = MetricsHooks()

    worker = make_worker(
        kind,
        make_transport(kind, store, max_attempts=2),
        handlers.hang_or_ok,
        isolation="process",
        hard_timeout=1.0,
        retry=NO_DELAY,
        hooks=hooks,
    )
    report = run(worker)
    starts = handlers.marks(tmp_path, "start")
    assert [n for n, _ in starts] == [0, 0, 1], starts
    assert starts[0][1] != starts[1][1]  # the killed child was replaced
    assert handlers.marks(tmp_path, "end") == [starts[2]]
    _wait_until(lambda: not any(handlers.pid_alive(p) for _, p in starts), "children ended")
    # The first timeout was retried; the second was the last attempt: the transport
    # dead-letters it (counted so). Both were timeouts.
    assert (report.retried, report.dead_lettered, report.acked) == (1, 1, 1), report
    assert report.timed_out == 2, report
    assert adds_up(report), report
    [letter] = queue.dead_letters()
    assert letter.error is not None
    assert letter.error.type == "TimeoutError", letter
    assert "hard_timeout" in letter.error.message
    assert queue.stats().messages == 0
    assert hooks.unstoppable == 0  # a process can be stopped: nothing was left running


@both
def test_at_the_end_of_the_grace_a_handler_process_is_killed_and_released(
    kind: str, tmp_path: Path
) -> None:
    """A stop whose grace runs out kills the child and releases its message: the attempt does
    not count, and the group is free at once (no lease left to expire)."""
    store = MemoryStore()
    queue = _queue(store, tmp_path, "g")
    worker = make_worker(
        kind,
        make_transport(kind, store),
        handlers.hang,
        isolation="process",
        shutdown_grace=0.3,
    )
    result: list[WorkerReport] = []
    thread = threading.Thread(target=lambda: result.append(run(worker, stop_when_idle=False)))
    thread.start()
    _wait_until(lambda: handlers.marks(tmp_path, "start"), "the handler started")
    [(_, pid)] = handlers.marks(tmp_path, "start")
    worker.stop(graceful=True)
    thread.join(20)
    assert not thread.is_alive()
    _wait_until(lambda: not handlers.pid_alive(pid), "the child ended")
    report = result[0]
    assert (report.claimed, report.released, report.timed_out) == (1, 1, 0), report
    lease = queue.claim()
    assert lease is not None
    assert lease.attempt == 1, lease  # the killed run did not count


@both
def test_a_handler_process_that_dies_fails_its_attempt_and_the_worker_goes_on(
    kind: str, tmp_path: Path
) -> None:
    store = MemoryStore()
    queue = _queue(store, tmp_path, "a", "b", max_attempts=1)
    worker = make_worker(
        kind,
        make_transport(kind, store, max_attempts=1),
        handlers.exit_or_ok,
        isolation="process",
    )
    report = run(worker)
    assert (report.acked, report.dead_lettered + report.retried) == (1, 1), report
    assert [n for n, _ in handlers.marks(tmp_path, "end")] == [1]
    [letter] = queue.dead_letters()
    assert letter.group_id == "a"
    assert letter.error is not None
    assert letter.error.type == "pgque.core.worker.HandlerProcessDied", letter
    assert "exit code 3" in letter.error.message


@both
def test_a_failure_in_the_child_is_recorded_with_its_type(kind: str, tmp_path: Path) -> None:
    """An exception crosses back to the worker as itself; one that cannot be rebuilt there
    arrives as a RuntimeError naming its type and message."""
    store = MemoryStore()
    queue = InMemoryTransport(store=store, max_attempts=1)
    queue.publish("a", Event(kind="k", data={"dir": str(tmp_path), "n": 0}))
    queue.publish("b", Event(kind="k", data={"dir": str(tmp_path), "n": 1, "refused": True}))
    worker = make_worker(
        kind, make_transport(kind, store, max_attempts=1), handlers.fail, isolation="process"
    )
    report = run(worker)
    assert report.acked == 0, report
    assert adds_up(report), report
    errors = {
        letter.group_id: (letter.error.type, letter.error.message)
        for letter in queue.dead_letters()
        if letter.error is not None
    }
    assert errors == {
        "a": ("ValueError", "bad input 0"),
        "b": ("RuntimeError", "Refused: refused (code 7)"),
    }


@both
def test_a_child_serves_one_message_after_another(kind: str, tmp_path: Path) -> None:
    store = MemoryStore()
    _queue(store, tmp_path, *[f"g{n}" for n in range(5)])
    worker = make_worker(kind, make_transport(kind, store), handlers.ok, isolation="process")
    report = run(worker)
    assert report.acked == 5
    pids = {pid for _, pid in handlers.marks(tmp_path, "end")}
    assert len(pids) == 1, pids  # one slot, one child, reused
    _wait_until(lambda: not handlers.pid_alive(pids.pop()), "the child ended with the run")


@both
def test_isolation_is_checked(kind: str) -> None:
    transport = InMemoryTransport(store=MemoryStore())
    with pytest.raises(InvalidInput, match="module-level"):
        make_worker(kind, transport, lambda event: None, isolation="process")
    with pytest.raises(InvalidInput, match="isolation must be"):
        make_worker(kind, transport, handlers.ok, isolation="fork")


def test_an_async_handler_runs_in_the_child_and_is_killed_there(tmp_path: Path) -> None:
    """(AsyncWorker only: Worker takes plain functions.)"""
    kind = "async"
    store = MemoryStore()
    queue = _queue(store, tmp_path, "g", max_attempts=1)
    worker = make_worker(
        kind,
        make_transport(kind, store, max_attempts=1),
        handlers.hang_async,
        isolation="process",
        hard_timeout=0.5,
    )
    report = run(worker)
    assert report.dead_lettered == 1, report  # it timed out on its last attempt
    [(_, pid)] = handlers.marks(tmp_path, "start")
    _wait_until(lambda: not handlers.pid_alive(pid), "the child was killed")
    assert len(queue.dead_letters()) == 1


CHILD_OF_A_DEAD_WORKER = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from pgque.conformance import process_handlers as handlers
    from pgque.core import Event
    from pgque.core.worker._running.processes import HandlerProcesses
    from pgque.core.worker._running.threads import HandlerThreads

    folder = Path(sys.argv[1])
    if __name__ == "__main__":
        processes = HandlerProcesses(handlers.hang, HandlerThreads("t").submit)
        processes.submit(Event(kind="k", data={"dir": str(folder), "n": 0}))
        while not handlers.marks(folder, "start"):
            time.sleep(0.01)
        print("started", flush=True)
        time.sleep(60)
    """
)


def test_a_handler_process_ends_when_its_worker_is_killed(tmp_path: Path) -> None:
    """A worker killed outright (SIGKILL, OOM) cannot kill its children: each watches its
    parent and ends itself, so no handler outlives its worker's lease."""
    script = tmp_path / "worker.py"
    script.write_text(CHILD_OF_A_DEAD_WORKER)
    folder = tmp_path / "marks"
    folder.mkdir()
    worker = subprocess.Popen(
        [sys.executable, str(script), str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "started"
        [(_, pid)] = handlers.marks(folder, "start")
        assert handlers.pid_alive(pid)
        worker.kill()
        worker.wait(10)
        _wait_until(lambda: not handlers.pid_alive(pid), "the orphaned child ended", 10)
    finally:
        worker.kill()
        worker.wait(10)
        if worker.stdout is not None:
            worker.stdout.close()
