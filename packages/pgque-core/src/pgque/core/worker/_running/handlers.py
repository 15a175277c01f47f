"""The user's handler: how it is called (the event, or the event and its lease), whether it is
async, where its calls run (:class:`Handler`: threads, or child processes), and what a
finished call raised."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from pgque.core.errors import InvalidInput
from pgque.core.models import Lease
from pgque.core.worker._running.processes import HandlerProcesses, check_isolation
from pgque.core.worker._running.threads import HandlerThreads

__all__ = [
    "Handler",
    "HandlerCancelled",
    "wants_lease",
    "is_async_callable",
    "check_handler",
    "handler_error",
    "consume_result",
]


def wants_lease(handler: Callable[..., Any]) -> bool:
    """Return True if *handler* takes two positional parameters: ``(event, lease)``.

    Raises InvalidInput if *handler* is not callable or cannot take the event at all.
    """
    if not callable(handler):
        raise InvalidInput(f"handler must be callable, not {type(handler).__name__}")
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return False  # builtins without a signature get the event alone
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in kinds]
    required_kw = [
        p
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    if not positional or required_kw:
        raise InvalidInput(
            "handler must accept the event as its first positional parameter "
            "(and the lease as its second, if it wants it)"
        )
    return len(positional) >= 2


def is_async_callable(handler: Callable[..., Any]) -> bool:
    """Return True if calling *handler* returns a coroutine (``async def``, also wrapped).

    An object may say it itself with a bool ``__pgque_async__`` attribute: a
    :class:`~pgque.core.Router` is async or not by the handlers it holds.
    """
    target: Any = handler
    while isinstance(target, functools.partial):
        target = target.func
    said = getattr(target, "__pgque_async__", None)
    if isinstance(said, bool):
        return said
    if inspect.iscoroutinefunction(target):
        return True
    call = getattr(target, "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def check_handler(handler: Callable[..., Any], *, allow_async: bool) -> bool:
    """Return True if *handler* is async; refuse an async handler unless *allow_async*.

    Raises InvalidInput for an async handler given to the blocking ``Worker``.
    """
    is_async = is_async_callable(handler)
    if is_async and not allow_async:
        router = hasattr(handler, "__pgque_async__")
        what = "has async handlers" if router else "is async (async def)"
        raise InvalidInput(f"the handler {what}: run it with AsyncWorker")
    return is_async


class HandlerCancelled(Exception):
    """The handler's task was cancelled from inside (it raised CancelledError itself)."""


def handler_error(future: Any) -> BaseException | None:
    """Return what the finished handler *future* raised, or None if it returned."""
    if future.cancelled():
        return HandlerCancelled("the handler was cancelled")
    error: BaseException | None = future.exception()
    return error


def consume_result(future: Any) -> None:
    """Retrieve an abandoned handler's result so asyncio does not warn it was never read."""
    if not future.cancelled():
        future.exception()


class Handler:
    """A worker's handler and what runs its calls, for the worker's whole life.

    *takes_lease*: it is called with ``(event, lease)``, else with the event alone;
    *is_async*: it is ``async def`` (an asyncio worker runs it as a task). Blocking calls run
    in reused threads named after the worker (*name*); with *isolation* ``"process"``, in
    child processes. Raises InvalidInput for an *isolation* that is neither, or ``"process"``
    with a handler a child cannot import by name.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        takes_lease: bool,
        is_async: bool,
        isolation: object,
        name: str,
    ) -> None:
        self.fn = fn
        self.takes_lease = takes_lease
        self.is_async = is_async
        self.threads = HandlerThreads(f"{name}-handler")
        self.processes: HandlerProcesses | None = None
        if check_isolation(isolation, fn) == "process":
            self.processes = HandlerProcesses(fn, self.threads.submit)

    def args(self, lease: Lease) -> tuple[Any, ...]:
        """Return the arguments of a call on *lease*."""
        return (lease.event, lease) if self.takes_lease else (lease.event,)

    def reopen(self) -> None:
        """Keep threads and children for reuse again (a worker's next run)."""
        self.threads.reopen()
        if self.processes is not None:
            self.processes.reopen()

    def close(self) -> None:
        """End the idle children and threads (busy ones end when their call returns)."""
        if self.processes is not None:
            self.processes.close()
        self.threads.close()
