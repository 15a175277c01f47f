"""Threads for blocking handlers: :class:`HandlerThreads` (reused from one message to the
next) and :func:`run_in_thread` (one new thread per call)."""

from __future__ import annotations

import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["run_in_thread", "HandlerThreads"]


def run_in_thread(
    fn: Callable[..., Any], *args: Any, name: str = "pgque-handler"
) -> concurrent.futures.Future[Any]:
    """Run ``fn(*args)`` in a new daemon thread; return a future of its result.

    A fresh thread per call (not a pool) so that a handler abandoned at its hard timeout never
    holds a pool slot that later handlers wait for. Context variables are copied.
    """
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = context.run(fn, *args)
        except BaseException as exc:  # handed to the worker, which decides
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


class HandlerThreads:
    """Daemon threads that run blocking handlers, reused from one message to the next.

    A thread whose handler returned waits for the next call (up to *idle_s* seconds, then it
    ends), so a busy worker does not start a thread per message. A handler that never
    returns (abandoned at its hard timeout) holds only its own thread: a call that finds no
    waiting thread starts a new one. Context variables are copied per call.
    """

    def __init__(self, name: str, idle_s: float = 5.0) -> None:
        self._name = name
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._waiting: list[queue.SimpleQueue[Any]] = []
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        """Run ``fn(*args)`` in a waiting thread (or a new one); return a future of it."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        job = (future, contextvars.copy_context(), fn, args)
        with self._lock:
            inbox = self._waiting.pop() if self._waiting else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            thread = threading.Thread(target=self._serve, args=(inbox,), name=self._name)
            thread.daemon = True
            thread.start()
        inbox.put(job)
        return future

    def close(self) -> None:
        """End the waiting threads (threads still running a handler end when it returns)."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, []
        for inbox in waiting:
            inbox.put(None)

    def reopen(self) -> None:
        """Allow threads to wait for work again (a worker's next run)."""
        with self._lock:
            self._closed = False

    def _serve(self, inbox: queue.SimpleQueue[Any]) -> None:
        while True:
            try:
                job = inbox.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    if inbox in self._waiting:
                        self._waiting.remove(inbox)
                        return
                job = inbox.get()  # a call took this thread just now: its job is coming
            if job is None:
                return
            future, context, fn, args = job
            job = None
            if future.set_running_or_notify_cancel():
                try:
                    result = context.run(fn, *args)
                except BaseException as exc:  # handed to the worker, which decides
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, context, fn, args
            with self._lock:
                if self._closed:
                    return
                self._waiting.append(inbox)
