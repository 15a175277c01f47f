"""One demo worker: a :class:`~pgque.core.worker.Worker` on its own transport that records what
it observes, run in a spawned process (or a thread, for ``memory://``).

What each handler call records, and why it can be compared across processes:

- ``enter``/``exit`` come from ``time.monotonic_ns()``. On Linux this is ``CLOCK_MONOTONIC``,
  one clock for the whole machine (also on macOS and Windows), so intervals recorded by
  different processes can be ordered against each other to prove that no two handlers of one
  group overlapped.
- ``claimed_s`` is when the *server* granted the lease: ``lease.expires_at - visibility``, by
  the server's clock, so sorting by it gives the server's claim order.
- ``settled_ns`` (wall clock, ``time.time_ns()``) is taken after the ack returned; compared
  with ``claimed_s`` it bounds how long a group waited for its next turn. That comparison
  needs the server's clock to be this machine's clock (a local server), so the demo only
  checks fairness then.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
import traceback

from pgque.core.cli._demo_types import (
    Flag,
    HandledRecord,
    SettledRecord,
    SharedInt,
    WorkerResult,
    WorkerSpec,
    write_result,
)
from pgque.core.models import Event, Lease
from pgque.core.registry import connect
from pgque.core.worker import Outcome, Worker, WorkerHooks

__all__ = ["run_demo_worker"]


class _Recorder(WorkerHooks):
    def __init__(self, acked: SharedInt) -> None:
        self.settled: list[SettledRecord] = []
        self.errors: list[str] = []
        self._acked = acked

    def on_outcome(self, outcome: Outcome, duration_s: float, lease: Lease) -> None:
        self.settled.append((lease.group_id, lease.message_id, outcome.value, time.time_ns()))
        if outcome is Outcome.ACKED:
            with self._acked.get_lock():
                self._acked.value += 1

    def on_error(self, error: BaseException, lease: Lease | None) -> None:
        self.errors.append(f"{type(error).__name__}: {error}")


#: How often a demo worker process checks that the demo that started it still runs.
PARENT_CHECK_S = 0.5


def _stop_when_orphaned(stop: Flag) -> None:
    """Set *stop* once the demo that started this process is gone (killed, even by SIGKILL):
    a worker process never outlives its demo.

    The demo's pid comes from the spawn itself, not from ``getppid()`` here: a demo killed
    while this process was still importing would otherwise be missed (this process, already
    adopted, would take its new parent for the demo and never stop).
    """
    spawner = multiprocessing.parent_process()
    parent = spawner.pid if spawner is not None and spawner.pid is not None else os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            if stop.wait(PARENT_CHECK_S):
                return
        stop.set()

    threading.Thread(target=watch, name="pgque-demo-parent-watch", daemon=True).start()


def run_demo_worker(
    spec: WorkerSpec, ready: SharedInt, acked: SharedInt, stop: Flag, in_process: bool
) -> None:
    """Run one demo worker until *stop* is set, then write a :class:`WorkerResult`.

    *ready* is incremented once the transport is open; *acked* on every ack. In a spawned
    process SIGINT is ignored: the parent owns Ctrl-C and stops every worker through *stop*.
    Never raises: a fatal error is written into the result instead.
    """
    if not in_process:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _stop_when_orphaned(stop)
    handled: list[HandledRecord] = []
    recorder = _Recorder(acked)
    visibility = spec.visibility
    work_s = spec.work_s
    label = spec.label

    def handle(event: Event, lease: Lease) -> None:
        enter = time.monotonic_ns()
        enter_wall = time.time_ns()
        if work_s:
            time.sleep(work_s)
        data = event.data
        raw_seq = data.get("seq") if isinstance(data, dict) else None
        seq = raw_seq if isinstance(raw_seq, int) else -1
        handled.append(
            (
                lease.group_id,
                seq,
                lease.message_id,
                lease.attempt,
                lease.priority,
                lease.expires_at - visibility,
                enter,
                time.monotonic_ns(),
                enter_wall,
                event.created_at.timestamp(),
                label,
            )
        )

    result = WorkerResult(label, handled, recorder.settled, {})
    try:
        with connect(spec.url, **spec.options) as transport:
            worker = Worker(
                transport,
                handle,
                concurrency=spec.concurrency,
                visibility=visibility,
                idle_backoff=(0.002, 0.05),
                hooks=recorder,
                name=label,
            )
            with ready.get_lock():
                ready.value += 1

            def stopper() -> None:
                stop.wait()
                worker.stop(graceful=True)

            threading.Thread(target=stopper, name=f"{label}-stopper", daemon=True).start()
            report = worker.run(install_signal_handlers=False)
            result.report = dict(report.as_dict())
    except BaseException as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        if os.environ.get("PGQUE_DEBUG"):
            traceback.print_exc()
    if recorder.errors:
        result.report["transport_errors"] = float(len(recorder.errors))
    with contextlib.suppress(OSError):
        write_result(spec.result_path, result)
