"""``pgque worker --processes N``: a supervisor that runs N worker processes and keeps them up.

Each worker process is the same ``pgque worker`` command line run again in a fresh interpreter
(nothing of the supervisor is inherited: no connection, no thread, no imported handler), with
``PGQUE_SUPERVISOR_PID`` set in its environment so that it runs as one worker. The supervisor
itself opens no connection and imports no handler. It:

- starts the N processes, each in its own session so that a Ctrl-C at the terminal reaches the
  supervisor only (which forwards it, once);
- relays their stderr line by line and their stdout, keeping each one's final JSON report;
- restarts a process that dies, after a backoff, logging one line with its exit code or signal;
- gives up (stops the others, exits 1 with one line) when a process exits with an error soon
  after it started (a handler that fails to import, a bad setting) or when processes die too
  often (more than ``DEATHS_ALLOWED`` within ``DEATH_WINDOW_S``);
- forwards SIGINT and SIGTERM to every process (a second signal too: they stop at once), kills
  those still running ``KILL_MARGIN_S`` after their ``--shutdown-grace``, waits for them all and
  prints one JSON report: the sum of theirs.

A worker process whose supervisor disappears (killed with SIGKILL) stops itself gracefully.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import click

from pgque.core.cli._config import resolve_config
from pgque.core.cli._errors import CliError
from pgque.core.cli._reach import wait_until_reachable
from pgque.core.worker import Backoff

__all__ = [
    "ARGS_KEY",
    "DEATHS_ALLOWED",
    "DEATH_WINDOW_S",
    "KILL_MARGIN_S",
    "RememberArgs",
    "SUPERVISOR_ENV",
    "SLOT_ENV",
    "process_slot",
    "supervised",
    "START_S",
    "DeathRecord",
    "dispatch",
    "supervise",
]

#: Set in a worker process's environment to its supervisor's pid: "run as one worker".
SUPERVISOR_ENV = "PGQUE_SUPERVISOR_PID"
#: Set in a worker process's environment to its slot, 1 to N (a restarted process keeps the
#: slot of the one it replaces): process k serves its metrics on ``--prometheus-port`` + k - 1.
SLOT_ENV = "PGQUE_WORKER_PROCESS"
#: A process that exits with an error within this many seconds of its start failed to start:
#: starting it again would fail the same way, so the supervisor gives up.
START_S = 5.0
#: The supervisor gives up when processes died more than this many times ...
DEATHS_ALLOWED = 5
#: ... within this many seconds.
DEATH_WINDOW_S = 60.0
#: First and longest wait before a dead process is started again (doubling per slot).
RESTART_BACKOFF = (0.5, 30.0)
#: A process that lived this long before dying restarts after the shortest wait again.
HEALTHY_S = 60.0
#: After the grace of a stop, processes still running get this long before SIGKILL.
KILL_MARGIN_S = 10.0
#: After a second SIGINT/SIGTERM, how often it is sent again to the processes still running.
RESEND_S = 0.5
#: How often a worker process checks that its supervisor is still there.
PARENT_CHECK_S = 1.0
#: Where the command line of ``pgque worker`` is kept in the click context.
ARGS_KEY = "pgque.worker_args"
#: How a worker process's one-line error starts (printed by the command-line's error boundary).
_ERROR_PREFIX = b"pgque: error: "

log = logging.getLogger("pgque.supervisor")


class RememberArgs(click.Command):
    """A click command that keeps its raw arguments (to run itself again in a process)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Keep *args* in ``ctx.meta[ARGS_KEY]``, then parse them as click does."""
        ctx.meta[ARGS_KEY] = list(args)
        return super().parse_args(ctx, args)


def dispatch(
    processes: int,
    *,
    shutdown_grace: float,
    stop_when_idle: bool,
    log_level: str,
    url: str | None,
    queue_name: str | None,
    env_file: Path | None,
) -> bool:
    """Run the supervisor when asked for several processes; return True when it ran.

    In a process the supervisor started, or with ``processes == 1``, return False at once (the
    caller runs one worker); the former also starts the watch on the supervisor.
    """
    global _supervised
    parent = os.environ.pop(SUPERVISOR_ENV, None)
    if parent is not None:
        _supervised = True
        _watch_parent(int(parent) if parent.isdigit() else -1)
        return False
    if processes <= 1:
        return False
    config = resolve_config(url, queue_name, env_file)  # bad settings: one line here, not N
    if config.scheme == "memory":
        raise CliError(
            "--processes needs a queue on a server: a memory:// queue lives inside one process "
            "(use postgresql://... or redis://...)",
            2,
        )
    # A server that is down: one line here after --connect-timeout, not N processes' deaths.
    wait_until_reachable(config)
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    ctx = click.get_current_context()
    command = [sys.executable, "-m", "pgque.core.cli", ctx.info_name or "worker"]
    report = supervise(
        [*command, *ctx.meta.get(ARGS_KEY, [])],
        processes,
        shutdown_grace=shutdown_grace,
        stop_when_idle=stop_when_idle,
    )
    click.echo(json.dumps(report, sort_keys=True))
    return True


def _watch_parent(parent: int) -> None:
    """Stop this process gracefully (SIGTERM to itself) once its supervisor has gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        log.warning("supervisor (pid %d) is gone: stopping", parent)
        os.kill(os.getpid(), signal.SIGTERM)

    if parent > 0:
        threading.Thread(target=watch, name="pgque-supervisor-watch", daemon=True).start()


@dataclass
class DeathRecord:
    """The give-up rules: a failed start, or too many deaths within a window."""

    allowed: int = DEATHS_ALLOWED
    window_s: float = DEATH_WINDOW_S
    start_s: float = START_S
    times: collections.deque[float] = field(default_factory=collections.deque)

    def verdict(self, now: float, lived_s: float, returncode: int) -> str | None:
        """Count one death at *now*; return why to give up, or None to restart.

        *returncode* is the process's (negative: killed by that signal).
        """
        if returncode > 0 and lived_s < self.start_s:
            return f"not restarting it (a process must live {self.start_s:g} s to have started)"
        self.times.append(now)
        while self.times and self.times[0] <= now - self.window_s:
            self.times.popleft()
        if len(self.times) > self.allowed:
            return (
                f"giving up: worker processes died {len(self.times)} times within "
                f"{self.window_s:g} s"
            )
        return None


#: True in a worker process a supervisor started (set by dispatch()).
_supervised = False


def supervised() -> bool:
    """Return True in a worker process that a ``--processes`` supervisor started.

    Such a process waits for its server as long as it takes: the supervisor checked at its
    own start that the server answers, so a process started later (a replacement) during an
    outage rides it out like the running ones, instead of dying again and again.
    """
    return _supervised


def process_slot() -> int:
    """Return this worker process's slot (1 to N) under a supervisor; 1 outside one."""
    value = os.environ.get(SLOT_ENV, "")
    return int(value) if value.isdigit() and int(value) >= 1 else 1


@dataclass
class _Child:
    """One worker process and what the supervisor learnt from it."""

    slot: int
    proc: subprocess.Popen[bytes]
    started: float
    report: dict[str, Any] | None = None
    error: str | None = None
    readers: list[threading.Thread] = field(default_factory=list)


def _describe(child: _Child, lived_s: float) -> str:
    code = child.proc.returncode
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    text = (
        f"worker process {child.slot} (pid {child.proc.pid}) {how} {lived_s:.1f} s after it started"
    )
    return f"{text}: {child.error}" if child.error else text


class _Supervisor:
    """The state of one ``supervise()`` run; its loop runs in the calling (main) thread."""

    def __init__(
        self, command: Sequence[str], processes: int, *, shutdown_grace: float, stop_when_idle: bool
    ) -> None:
        self.command = list(command)
        self.processes = processes
        self.grace = shutdown_grace
        self.stop_when_idle = stop_when_idle
        self.events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.children: dict[int, _Child] = {}
        self.restart_at: dict[int, float] = {}
        self.backoffs = {
            slot: Backoff(*RESTART_BACKOFF, jitter=0.5) for slot in range(1, processes + 1)
        }
        self.deaths = DeathRecord()
        self.reports: list[dict[str, Any]] = []
        self.signals = 0
        self.stopping = False
        self.kill_at: float | None = None
        self.killed = 0
        self.at_once: int | None = None
        self.resend_at: float | None = None
        self.failure: str | None = None
        self.restarts = 0
        self.out_lock = threading.Lock()

    # ---------------------------------------------------------------- processes

    def start(self, slot: int) -> None:
        """Start the worker process of *slot*."""
        env = {**os.environ, SUPERVISOR_ENV: str(os.getpid()), SLOT_ENV: str(slot)}
        posix = os.name == "posix"
        proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            close_fds=True,
            start_new_session=posix,
        )
        child = _Child(slot=slot, proc=proc, started=time.monotonic())
        assert proc.stdout is not None
        assert proc.stderr is not None
        child.readers = [
            threading.Thread(target=self._relay_out, args=(child, proc.stdout), daemon=True),
            threading.Thread(target=self._relay_err, args=(child, proc.stderr), daemon=True),
        ]
        for reader in child.readers:
            reader.start()
        threading.Thread(target=self._wait, args=(child,), daemon=True).start()
        self.children[slot] = child
        log.info("started worker process %d (pid %d)", slot, proc.pid)

    def _write(self, stream: IO[bytes], line: bytes) -> None:
        with self.out_lock:
            stream.write(line if line.endswith(b"\n") else line + b"\n")
            stream.flush()

    def _relay_out(self, child: _Child, pipe: IO[bytes]) -> None:
        # One line behind: the last line is the process's report, kept for the sum.
        held: bytes | None = None
        for line in iter(pipe.readline, b""):
            if held is not None:
                self._write(sys.stdout.buffer, held)
            held = line
        pipe.close()
        if held is None:
            return
        try:
            report = json.loads(held)
        except ValueError:
            report = None
        if isinstance(report, dict) and "claimed" in report:
            child.report = report
        else:
            self._write(sys.stdout.buffer, held)

    def _relay_err(self, child: _Child, pipe: IO[bytes]) -> None:
        for line in iter(pipe.readline, b""):
            if line.startswith(_ERROR_PREFIX):
                # Its one-line error goes into the supervisor's line about its exit.
                child.error = line[len(_ERROR_PREFIX) :].decode(errors="replace").strip()
            else:
                self._write(sys.stderr.buffer, line)
        pipe.close()

    def _wait(self, child: _Child) -> None:
        child.proc.wait()
        for reader in child.readers:
            reader.join(timeout=5.0)  # a grandchild may hold the pipes open
        self.events.put(("exit", child))

    def signal_all(self, signum: int) -> None:
        """Send *signum* to every running worker process."""
        for child in self.children.values():
            if child.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                    child.proc.send_signal(signum)

    # ---------------------------------------------------------------- events

    def on_signal(self, signum: int) -> None:
        """Handle SIGINT/SIGTERM received by the supervisor: stop (at once the second time)."""
        self.signals += 1
        global _first_signal
        if _first_signal is None:
            _first_signal = signum
        name = signal.Signals(signum).name
        now = time.monotonic()
        # Forwarded before the line is logged: once it is, every process has been sent it.
        self.signal_all(signum)
        if self.signals == 1:
            log.warning(
                "received %s: stopping %d worker processes (again to stop at once)",
                name,
                len(self.children),
            )
            self.begin_stop(now)
        else:
            log.warning("received %s again: stopping the worker processes at once", name)
            self.kill_at = min(self.kill_at or now + KILL_MARGIN_S, now + KILL_MARGIN_S)
            # A process that had not yet handled the first signal when the second came got
            # the two merged into one (the kernel keeps one pending signal of a kind): it would
            # take this for the first and finish its handlers. Sending it again until the
            # processes end makes sure each sees a second one.
            self.at_once = signum
            self.resend_at = now + RESEND_S

    def begin_stop(self, now: float) -> None:
        """Stop restarting; give the running processes their grace before SIGKILL."""
        if not self.stopping:
            self.stopping = True
            self.restart_at.clear()
            self.kill_at = now + self.grace + KILL_MARGIN_S

    def on_exit(self, child: _Child) -> None:
        """Handle the end of *child*: keep its report, then restart it or not."""
        del self.children[child.slot]
        if child.report is not None:
            self.reports.append(child.report)
        now = time.monotonic()
        lived = now - child.started
        code = child.proc.returncode
        if self.stopping:
            if code != 0 and self.failure is None:
                log.warning("%s", _describe(child, lived))
            return
        if code == 0 and self.stop_when_idle:
            log.info("worker process %d (pid %d) is done", child.slot, child.proc.pid)
            return
        verdict = self.deaths.verdict(now, lived, code)
        if verdict is not None:
            self.failure = f"{_describe(child, lived)}; {verdict}"
            self.begin_stop(now)
            self.signal_all(signal.SIGTERM)
            return
        backoff = self.backoffs[child.slot]
        if lived >= HEALTHY_S:
            backoff.reset()
        delay = backoff.next()
        log.warning("%s; starting another in %.1f s", _describe(child, lived), delay)
        self.restart_at[child.slot] = now + delay

    def on_time(self, now: float) -> None:
        """Start the processes whose restart is due; kill those past their stop's deadline."""
        for slot, due in list(self.restart_at.items()):
            if due <= now:
                del self.restart_at[slot]
                self.restarts += 1
                self.start(slot)
        if self.at_once is not None and self.resend_at is not None and now >= self.resend_at:
            self.signal_all(self.at_once)
            self.resend_at = now + RESEND_S
        if self.kill_at is not None and now >= self.kill_at:
            late = [c for c in self.children.values() if c.proc.returncode is None]
            if late:
                log.warning("%d worker processes did not stop in time: killing them", len(late))
                self.killed += len(late)
                self.signal_all(signal.SIGKILL)
            self.kill_at = None

    def run(self) -> dict[str, Any]:
        """Run until every process ended; return the summed report (raise CliError on failure)."""
        began = time.monotonic()
        for slot in range(1, self.processes + 1):
            self.start(slot)
        while self.children or self.restart_at:
            now = time.monotonic()
            timers = [
                *self.restart_at.values(),
                *([self.kill_at] if self.kill_at else []),
                *([self.resend_at] if self.resend_at else []),
            ]
            wait = min([1.0, *(t - now for t in timers)])
            try:
                kind, value = self.events.get(timeout=max(wait, 0.0))
            except queue.Empty:
                self.on_time(time.monotonic())
                continue
            if kind == "exit":
                self.on_exit(value)
            else:
                self.on_signal(value)
            self.on_time(time.monotonic())
        if self.failure is not None:
            raise CliError(self.failure)
        total = _sum(self.reports)
        total["elapsed_s"] = round(time.monotonic() - began, 6)
        total["processes"] = self.processes
        total["restarts"] = self.restarts
        if self.killed:
            click.echo(json.dumps(total, sort_keys=True))
            raise CliError(
                f"{self.killed} worker processes did not stop within --shutdown-grace "
                f"+ {KILL_MARGIN_S:g} s and were killed (their leases expire; nothing is lost)"
            )
        return total


def _sum(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for report in reports:
        for key, value in report.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
    return total


#: The first stop signal the supervisor received in this process (None: none).
_first_signal: int | None = None


def first_signal() -> int | None:
    """Return the first SIGINT/SIGTERM the supervisor of this process received, or None."""
    return _first_signal


def supervise(
    command: Sequence[str],
    processes: int,
    *,
    shutdown_grace: float,
    stop_when_idle: bool,
) -> dict[str, Any]:
    """Run *command* in *processes* processes until they end; return their summed report.

    Must run in the main thread (it handles SIGINT and SIGTERM; the previous handlers are
    restored). Raises CliError when the processes keep dying or cannot start.
    """
    sup = _Supervisor(
        command, processes, shutdown_grace=shutdown_grace, stop_when_idle=stop_when_idle
    )
    previous: dict[signal.Signals, Callable[..., Any] | int | None] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        # SimpleQueue.put may be called from a signal handler (it is reentrant).
        previous[sig] = signal.signal(
            sig, lambda signum, _frame: sup.events.put(("signal", signum))
        )
    try:
        return sup.run()
    except BaseException:
        sup.signal_all(signal.SIGKILL)  # never leave workers behind on an unexpected error
        raise
    finally:
        for stop_signal, handler in previous.items():
            signal.signal(stop_signal, handler)
