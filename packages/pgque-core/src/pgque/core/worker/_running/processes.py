"""Handlers run in child processes (``isolation="process"``), so that one can be stopped.

A thread cannot be killed: a handler in one that overruns ``hard_timeout`` or the shutdown
grace keeps its lease until it returns. A child process can be: :class:`HandlerProcesses`
runs each call in a child (one per slot that needs it, reused from one message to the next)
and :meth:`HandlerCall.stop` kills it (SIGKILL), after which the call fails with
:class:`HandlerKilled` and the worker settles the lease (nack counted at the hard timeout,
release at the end of the grace).

A child is started with the ``spawn`` method (safe beside the worker's threads), imports the
handler by name, ignores SIGINT and SIGTERM (the worker decides when it stops) and ends when
the worker process is gone (it watches its parent), so a handler never outlives its worker and
its lease. A child that dies by itself (a crash, ``os._exit``) fails the call with
:class:`HandlerProcessDied`, a failed attempt like any exception; the next call gets a new child.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Literal

from pgque.core.errors import InvalidInput

__all__ = [
    "Isolation",
    "ISOLATIONS",
    "HandlerKilled",
    "HandlerProcessDied",
    "HandlerCall",
    "HandlerProcesses",
    "check_isolation",
    "hard_deadline",
    "CHILD_START_S",
    "CHILD_POLL_S",
]

#: Where a worker runs its handlers: ``"thread"`` (an asyncio task for an async handler of
#: an AsyncWorker, else a thread) or ``"process"`` (a child process that can be killed).
Isolation = Literal["thread", "process"]
ISOLATIONS: tuple[Isolation, ...] = ("thread", "process")

#: How often a child checks that its worker process still lives.
PARENT_CHECK_S = 0.2
#: How long an idle child gets to end after it is told to, before it is killed.
CHILD_EXIT_S = 2.0
#: How long a new child may take to start (Python, the handler's imports) before its call's
#: hard timeout runs anyway; a call's hard timeout counts from when its child starts it.
CHILD_START_S = 60.0
#: How often the worker looks whether a call's child has started it yet.
CHILD_POLL_S = 0.05
#: What a child sends when it has a call, before it runs the handler.
_STARTED = "started"


class HandlerKilled(Exception):
    """The handler's child process was killed by the worker (hard timeout, shutdown grace)."""

    # Recorded errors name a type by its module: the public one, wherever it is defined.
    __module__ = "pgque.core.worker"


class HandlerProcessDied(Exception):
    """The handler's child process ended while it ran the handler (a crash, ``os._exit``)."""

    __module__ = "pgque.core.worker"


def check_isolation(isolation: object, handler: Callable[..., Any]) -> Isolation:
    """Return *isolation* checked; for ``"process"``, *handler* must be importable by name.

    Raises InvalidInput otherwise.
    """
    if isolation not in ISOLATIONS:
        raise InvalidInput(f"isolation must be 'thread' or 'process', not {isolation!r}")
    if isolation == "process":
        try:
            pickle.loads(pickle.dumps(handler))
        except Exception as exc:
            raise InvalidInput(
                "isolation='process' runs the handler in a child process, which imports it by "
                "name: it must be a module-level function (or a picklable callable), not "
                f"{handler!r} ({type(exc).__name__}: {exc})"
            ) from None
    return "process" if isolation == "process" else "thread"


def hard_deadline(
    hard_timeout: float | None, started: float, call: HandlerCall | None
) -> float | None:
    """Return when (time.monotonic()) a handler started at *started* overruns *hard_timeout*.

    A handler in a child process (*call*) is timed from when its child started it (a child's
    own start is not the handler's time), or, while it has not, allowed ``CHILD_START_S`` more.
    """
    if hard_timeout is None:
        return None
    if call is None:
        return started + hard_timeout
    if call.begun_at is None:
        return started + hard_timeout + CHILD_START_S
    return call.begun_at + hard_timeout


class _Child:
    """One child process and the parent's end of its pipe."""

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()

    def end(self) -> None:
        """Tell an idle child to exit; kill it if it does not."""
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        self.process.join(CHILD_EXIT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(CHILD_EXIT_S)
        self.conn.close()


class HandlerCall:
    """One handler call running in a child process; :meth:`stop` kills the child."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._stopped = False
        #: when (time.monotonic()) the child started the handler; None until then
        self.begun_at: float | None = None

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopped

    def stop(self) -> None:
        """Kill the child running this call (at once if it runs, or as soon as it starts)."""
        with self._lock:
            self._stopped = True
            child = self._child
        if child is not None:
            child.kill()

    def attach(self, child: _Child) -> bool:
        """Note that *child* runs this call; False if the call was stopped before it began."""
        with self._lock:
            if self._stopped:
                return False
            self._child = child
            return True


class HandlerProcesses:
    """Child processes that run *handler*, reused from one call to the next.

    :meth:`submit` hands a call to an idle child (or a new one) and returns a future of it and
    the :class:`HandlerCall` that can stop it. The waits on the children run in *threads* (a
    pool of blocking callers, see :class:`~pgque.core.worker._running.threads.HandlerThreads`).
    """

    def __init__(self, handler: Callable[..., Any], submit_blocking: Callable[..., Any]) -> None:
        self._handler = handler
        self._submit_blocking = submit_blocking
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._idle: list[_Child] = []
        self._closed = False

    def submit(self, *args: Any) -> tuple[concurrent.futures.Future[Any], HandlerCall]:
        """Run ``handler(*args)`` in a child; return a future of it and its :class:`HandlerCall`."""
        call = HandlerCall()
        future: concurrent.futures.Future[Any] = self._submit_blocking(self._run, call, args)
        return future, call

    def close(self) -> None:
        """End the idle children (a busy one is ended when its call returns)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for child in idle:
            child.end()

    def reopen(self) -> None:
        """Keep children for reuse again (a worker's next run)."""
        with self._lock:
            self._closed = False

    def _take(self) -> _Child:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.process.is_alive():
                    return child
                child.conn.close()
        ours, theirs = self._context.Pipe()
        process = self._context.Process(
            target=_child_main,
            args=(theirs, self._handler, os.getpid()),
            name="pgque-handler",
            daemon=True,
        )
        process.start()
        theirs.close()
        return _Child(process, ours)

    def _give_back(self, child: _Child) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(child)
                return
        child.end()

    def _run(self, call: HandlerCall, args: tuple[Any, ...]) -> None:
        """Run one call in a child (in a blocking caller's thread); raise what it raised."""
        child = self._take()
        if not call.attach(child):
            self._give_back(child)
            raise HandlerKilled("the handler was stopped before its process started it")
        try:
            child.conn.send(args)
            reply = child.conn.recv()
            if reply == _STARTED:
                call.begun_at = time.monotonic()
                reply = child.conn.recv()
        except (EOFError, OSError):
            child.process.join(CHILD_EXIT_S)
            child.conn.close()
            code = child.process.exitcode
            pid = child.process.pid
            if call.stopped:
                raise HandlerKilled(f"the handler's process {pid} was killed") from None
            raise HandlerProcessDied(
                f"the handler's process {pid} died while it ran the handler (exit code {code})"
            ) from None
        self._give_back(child)
        if reply is not None:
            raise reply


# ---------------------------------------------------------------------- the child's side


def _child_main(conn: Connection, handler: Callable[..., Any], parent: int) -> None:
    """Serve calls from the worker until told to stop, the pipe closes or the worker is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides when a handler ends
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    loop: asyncio.AbstractEventLoop | None = None
    while True:
        try:
            args = conn.recv()
        except (EOFError, OSError):
            return
        if args is None:
            return
        conn.send(_STARTED)
        error: BaseException | None = None
        try:
            result = handler(*args)
            if inspect.isawaitable(result):
                loop = loop or asyncio.new_event_loop()
                loop.run_until_complete(result)
        except BaseException as exc:  # sent to the worker, which decides
            error = _portable(exc)
        conn.send(error)


def _watch_parent(parent: int) -> None:
    """End this child (at once, whatever it runs) when the worker process is gone."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


def _portable(exc: BaseException) -> BaseException:
    """Return *exc* with its traceback as a note, or a RuntimeError naming it when it cannot
    cross to the worker (pickled there and back)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    note = f"in the handler's process {os.getpid()}:\n{text}"
    try:
        copy: BaseException = pickle.loads(pickle.dumps(exc))
    except Exception:
        copy = RuntimeError(f"{type(exc).__qualname__}: {exc}")
    add_note = getattr(copy, "add_note", None)
    if add_note is not None:
        add_note(note)
    return copy
