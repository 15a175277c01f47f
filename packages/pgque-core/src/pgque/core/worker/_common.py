"""The parts of the worker that do not depend on threads versus tasks: option checks, handler
inspection, the outcome decision, hook and log helpers, threads for handlers, signals."""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import inspect
import logging
import os
import queue
import re
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from pgque.core.errors import InvalidInput
from pgque.core.models import Lease, Settlement
from pgque.core.validation import (
    MAX_BATCH,
    MAX_HOLDER_CHARS,
    MAX_PRIORITY,
    MAX_REASON_CHARS,
    MAX_VISIBILITY_S,
    OnExhausted,
)
from pgque.core.worker._outcome import Outcome
from pgque.core.worker._policy import Backoff, Reject, Retry, RetryPolicy
from pgque.core.worker.hooks import WorkerHooks

__all__ = [
    "EXTEND_FRACTION",
    "DEFAULT_HARD_TIMEOUT",
    "start_margin",
    "DEFAULT_PREFETCH",
    "RECONNECT_BACKOFF",
    "ERROR_JITTER",
    "Decision",
    "WorkerOptions",
    "decide",
    "is_final_attempt",
    "counted_outcome",
    "holder_label",
    "wants_lease",
    "is_async_callable",
    "check_handler",
    "run_in_thread",
    "HandlerThreads",
    "settlement_for",
    "SETTLE_VERB",
    "max_attempts_of",
    "on_exhausted_of",
    "SafeHooks",
    "Reachability",
    "SignalCounter",
    "WAKEUP_TEXTS",
    "watch_signals",
    "log",
]

log = logging.getLogger("pgque.worker")

#: A held lease is renewed when this fraction of its visibility has passed, leaving the other
#: half as slack for a slow round trip or a busy machine.
EXTEND_FRACTION = 0.5

#: The longest a handler runs by default (``hard_timeout``; None disables it): a handler that
#: never returns must not hold its group, and retry, forever. Past it an asyncio handler is
#: cancelled; one in a thread cannot be, so its lease is kept until it returns; either way the
#: attempt counts, so ``max_attempts`` is reached in the end.
DEFAULT_HARD_TIMEOUT = 3600.0

#: A lease is started only with at least this long left of it by the worker's own clock
#: (measured from when its claim was *sent*), and at most a tenth of the visibility: one that
#: arrives later may already be another worker's, so its handler never starts.
START_MARGIN_S = 0.5


def start_margin(visibility: float) -> float:
    """Return how long a lease must still last, by the local clock, for its handler to start."""
    return min(START_MARGIN_S, visibility / 10)


#: The most leases a worker claims ahead of its slots, by default (``prefetch``; how many it
#: really keeps follows the rate its slots take them, see the worker's exchange).
DEFAULT_PREFETCH = 64

#: Waits after a transport error: first, maximum (seconds). Bounded so that a worker resumes
#: within seconds of its server coming back.
RECONNECT_BACKOFF = (0.1, 5.0)
#: The jitter of those waits: two workers whose calls deadlocked each other (or that lost one
#: server together) must not retry in lockstep.
ERROR_JITTER = 0.5


def _positive(value: object, name: str, *, zero_ok: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number of seconds, not {value!r}")
    seconds = float(value)
    ok = seconds >= 0 if zero_ok else seconds > 0
    if not ok or seconds != seconds or seconds > MAX_VISIBILITY_S:
        bound = ">= 0" if zero_ok else "> 0"
        raise InvalidInput(f"{name} must be {bound} and at most one year, not {value!r}")
    return seconds


def _int(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an int from {low} to {high}, not {value!r}")
    return value


def default_name() -> str:
    """Return ``host:pid``, the default worker name used in logs and thread names."""
    return f"{socket.gethostname()}:{os.getpid()}"


def holder_label(slot: int | str) -> str:
    """Return ``host:pid:slot``, the ``holder`` of every claim a worker slot makes.

    *slot* is the slot's index, 0 to ``concurrency - 1`` (a thread of :class:`Worker`, a task
    of :class:`AsyncWorker`), or ``queued`` for a lease claimed ahead into the worker's buffer
    (``prefetch``), not yet taken by a slot. It is what ``GroupInfo.lease_holder`` shows an
    operator: the machine, the process and the slot holding a group. A host name too long
    for the 200 characters of a holder is cut. Raises nothing.
    """
    tail = f":{os.getpid()}:{slot}"
    host = socket.gethostname() or "localhost"
    return host[: MAX_HOLDER_CHARS - len(tail)] + tail


@dataclass(frozen=True)
class WorkerOptions:
    """The validated options of a worker (see :class:`Worker` for their meaning).

    Raises InvalidInput for any option out of range.
    """

    concurrency: int = 1
    visibility: float = 30.0
    batch_size: int = 1
    min_priority: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    hard_timeout: float | None = DEFAULT_HARD_TIMEOUT
    shutdown_grace: float = 30.0
    idle_backoff: tuple[float, float] = (0.05, 2.0)
    name: str = ""
    reconnect_backoff: tuple[float, float] = RECONNECT_BACKOFF
    #: the most leases claimed ahead into the worker's buffer (None: the larger of 64 and
    #: concurrency x batch_size)
    prefetch: int | None = None
    #: seconds after which a handler still running is reported as stuck, and again every
    #: ``warn_after`` seconds while it runs (None: never)
    warn_after: float | None = None

    def __post_init__(self) -> None:
        _int(self.concurrency, "concurrency", 1, 10_000)
        if self.prefetch is not None:
            _int(self.prefetch, "prefetch", 0, MAX_BATCH)
        _positive(self.visibility, "visibility")
        _int(self.batch_size, "batch_size", 1, MAX_BATCH)
        _int(self.min_priority, "min_priority", 0, MAX_PRIORITY)
        if not isinstance(self.retry, RetryPolicy):
            raise InvalidInput(f"retry must be a RetryPolicy, not {type(self.retry).__name__}")
        if self.hard_timeout is not None:
            _positive(self.hard_timeout, "hard_timeout")
        if self.warn_after is not None:
            _positive(self.warn_after, "warn_after")
        _positive(self.shutdown_grace, "shutdown_grace", zero_ok=True)
        for pair, label in (
            (self.idle_backoff, "idle_backoff"),
            (self.reconnect_backoff, "reconnect_backoff"),
        ):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise InvalidInput(f"{label} must be a (first, maximum) pair of seconds")
            Backoff(*pair)  # validates 0 < first <= maximum
        if not isinstance(self.name, str) or not self.name:
            raise InvalidInput("name must be a non-empty str")

    @classmethod
    def build(
        cls,
        *,
        concurrency: int,
        visibility: float,
        batch_size: int,
        min_priority: int,
        retry: RetryPolicy | None,
        hard_timeout: float | None,
        shutdown_grace: float,
        idle_backoff: tuple[float, float],
        name: str | None,
        reconnect_backoff: tuple[float, float] = RECONNECT_BACKOFF,
        prefetch: int | None = None,
        warn_after: float | None = None,
    ) -> WorkerOptions:
        """Validate and normalise the keyword options of a worker's constructor."""
        return cls(
            concurrency=concurrency,
            visibility=float(_positive(visibility, "visibility")),
            batch_size=batch_size,
            min_priority=min_priority,
            retry=RetryPolicy() if retry is None else retry,
            hard_timeout=None if hard_timeout is None else _positive(hard_timeout, "hard_timeout"),
            shutdown_grace=_positive(shutdown_grace, "shutdown_grace", zero_ok=True),
            idle_backoff=idle_backoff,
            name=default_name() if name is None else name,
            reconnect_backoff=reconnect_backoff,
            prefetch=prefetch,
            warn_after=None if warn_after is None else _positive(warn_after, "warn_after"),
        )

    @property
    def buffer_size(self) -> int:
        """Return how many leases the worker keeps claimed ahead of its slots."""
        if self.prefetch is not None:
            return self.prefetch
        return min(max(DEFAULT_PREFETCH, self.concurrency * self.batch_size), MAX_BATCH)

    @property
    def extend_every(self) -> float:
        """Return how often a held lease is renewed, in seconds."""
        return self.visibility * EXTEND_FRACTION


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


#: How logs name what a decision does to a lease ("could not ack message 7").
SETTLE_VERB: dict[Outcome, str] = {
    Outcome.ACKED: "ack",
    Outcome.RETRIED: "nack",
    Outcome.RELEASED: "release",
    Outcome.DEAD_LETTERED: "dead-letter",
    Outcome.TIMED_OUT: "nack (timed out)",
}


def settlement_for(lease: Lease, decision: Decision) -> Settlement:
    """Return the :class:`Settlement` carrying out *decision* on *lease*."""
    outcome = decision.outcome
    if outcome is Outcome.ACKED:
        return Settlement(lease, "ack")
    if outcome is Outcome.RELEASED:
        return Settlement(lease, "release")
    if outcome is Outcome.DEAD_LETTERED:
        return Settlement(lease, "dead_letter", reason=decision.reason, error=decision.error)
    return Settlement(lease, "nack", delay=decision.delay, error=decision.error)


def max_attempts_of(transport: object) -> int | None:
    """Return *transport*'s ``max_attempts``; None (unlimited) where it does not say."""
    value = getattr(transport, "max_attempts", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def on_exhausted_of(transport: object) -> OnExhausted:
    """Return *transport*'s ``on_exhausted`` policy (dead_letter where it has none)."""
    value = getattr(transport, "on_exhausted", "dead_letter")
    return "block" if value == "block" else "dead_letter"


@dataclass(frozen=True)
class Decision:
    """What to do with a message after its handler finished.

    *error* is what the handler raised (recorded by the transport: ``nack(error=)``,
    ``dead_letter(error=)``); *final* marks a retry on the message's last attempt, after
    which the transport dead-letters it or blocks its group.
    """

    outcome: Outcome
    delay: float = 0.0
    reason: str = ""
    error: BaseException | None = None
    final: bool = False


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


def is_final_attempt(attempt: int, max_attempts: int | None) -> bool:
    """Return True if delivery *attempt* is the last one ``max_attempts`` allows."""
    return max_attempts is not None and attempt >= max_attempts


def decide(
    error: BaseException | None,
    lease: Lease,
    policy: RetryPolicy,
    max_attempts: int | None = None,
) -> Decision:
    """Return the decision for a handler that returned (*error* None) or raised *error*.

    A failure on the last attempt *max_attempts* allows is nacked without delay: no retry
    follows, so waiting would only hold the group longer before the transport applies its
    ``on_exhausted`` policy at the next claim.
    """
    if error is None:
        return Decision(Outcome.ACKED)
    if isinstance(error, Reject):
        return Decision(Outcome.DEAD_LETTERED, reason=error.reason, error=error)
    if is_final_attempt(lease.attempt, max_attempts):
        return Decision(Outcome.RETRIED, error=error, final=True)
    if isinstance(error, Retry) and error.delay is not None:
        return Decision(Outcome.RETRIED, delay=error.delay, error=error)
    return Decision(Outcome.RETRIED, delay=policy.delay(lease.attempt), error=error)


def counted_outcome(outcome: Outcome, decision: Decision, on_exhausted: OnExhausted) -> Outcome:
    """Return how the report counts a lease that ended in *outcome* after *decision*.

    A failure (or a timeout) on the message's last attempt is nacked, and the transport then
    dead-letters the message at the next claim (``on_exhausted="dead_letter"``): it is
    counted ``DEAD_LETTERED``, as every dead letter a lease of the worker ended in. With
    ``"block"`` the message stays at its group's head, to be delivered again once an
    operator unblocks it: it keeps its count (``RETRIED``, ``TIMED_OUT``). Any other
    outcome (a lost nack, an ack) is counted as it is.
    """
    final = decision.final and outcome in (Outcome.RETRIED, Outcome.TIMED_OUT)
    if final and on_exhausted == "dead_letter":
        return Outcome.DEAD_LETTERED
    return outcome


def failure_reason(error: BaseException) -> str:
    """Return a short description of *error* (its class and message) for logs."""
    text = f"{type(error).__name__}: {error}"
    return text[:MAX_REASON_CHARS]


class SafeHooks:
    """Call a :class:`WorkerHooks` and log, never propagate, what it raises."""

    def __init__(self, hooks: Any) -> None:
        if hooks is not None and not isinstance(hooks, WorkerHooks):
            for method in ("on_claimed", "on_outcome", "on_error"):
                if not callable(getattr(hooks, method, None)):
                    raise InvalidInput(f"hooks must have a callable {method}()")
        self.hooks: WorkerHooks | None = hooks

    def claimed(self, lease: Lease) -> None:
        """Forward ``on_claimed``."""
        if self.hooks is not None:
            try:
                self.hooks.on_claimed(lease)
            except Exception:
                log.exception("pgque worker hook on_claimed failed")

    def outcome(self, outcome: Outcome, duration_s: float, lease: Lease) -> None:
        """Forward ``on_outcome``."""
        if self.hooks is not None:
            try:
                self.hooks.on_outcome(outcome, duration_s, lease)
            except Exception:
                log.exception("pgque worker hook on_outcome failed")

    def error(self, error: BaseException, lease: Lease | None) -> None:
        """Forward ``on_error``."""
        if self.hooks is not None:
            try:
                self.hooks.on_error(error, lease)
            except Exception:
                log.exception("pgque worker hook on_error failed")

    def stuck(self, lease: Lease, running_s: float) -> None:
        """Forward ``on_stuck`` (hooks written before it existed may lack it)."""
        on_stuck = getattr(self.hooks, "on_stuck", None)
        if on_stuck is not None:
            try:
                on_stuck(lease, running_s)
            except Exception:
                log.exception("pgque worker hook on_stuck failed")

    def unstoppable(self, lease: Lease, running_s: float) -> None:
        """Forward ``on_unstoppable`` (hooks written before it existed may lack it)."""
        on_unstoppable = getattr(self.hooks, "on_unstoppable", None)
        if on_unstoppable is not None:
            try:
                on_unstoppable(lease, running_s)
            except Exception:
                log.exception("pgque worker hook on_unstoppable failed")


_WHITESPACE = re.compile(r"\s+")


#: How long after the connection came back a failure is taken for a connection that went
#: stale during the outage (a pooled or listening connection used for the first time since):
#: logged at DEBUG, unless failures go on past it (then it is a new outage, and said so).
STALE_AFTER_BACK_S = 10.0


_LOST_TEXT = "lost the connection to the server (%s failed: %s); retrying every <=%g s"
_BACK_TEXT = "connection back after %.1f s, %d calls failed meanwhile"
#: The texts of the wake-up listener's tracker (its connection may be another: listen_url).
WAKEUP_TEXTS = (
    "wake-ups failed (%s failed: %s); polling instead, retrying every <=%g s",
    "wake-ups work again after %.1f s, %d waits failed meanwhile",
)


class Reachability:
    """Whether a worker reaches its server: one log line when it loses it, one when it is back.

    Every failed call on a lost connection goes to :meth:`lost`, every call that got an
    answer to :meth:`reached`; only the changes of state are logged at WARNING (the calls
    that fail in between at DEBUG). *retry_max* is the longest wait between two attempts
    (the worker's ``reconnect_backoff`` maximum). Thread-safe; :meth:`reached` is cheap
    while the server is reachable (it runs after every call).
    """

    def __init__(
        self,
        name: str,
        retry_max: float,
        *,
        texts: tuple[str, str] | None = None,
        quiet: Callable[[], bool] | None = None,
    ) -> None:
        self._name = name
        self._retry_max = retry_max
        #: the WARNING of a loss (operation, reason, retry_max) and of the way back (seconds,
        #: failed calls), after "worker NAME: "
        self._texts = texts or (_LOST_TEXT, _BACK_TEXT)
        #: while it returns True, a loss is not announced (another tracker speaks for it)
        self._quiet = quiet
        self._lock = threading.Lock()
        #: when the first call of the current outage failed (None: the server is reachable)
        self._since: float | None = None
        self._failed = 0
        #: whether the current outage was logged (not while it may be stale connections)
        self._announced = False
        self._back_at = -STALE_AFTER_BACK_S

    @property
    def down(self) -> bool:
        """True between a lost connection and the next call that got an answer."""
        return self._since is not None

    def settling(self) -> bool:
        """True while down, and for STALE_AFTER_BACK_S after an announced way back (calls
        on connections that went stale in the outage may still fail then)."""
        return self._since is not None or time.monotonic() - self._back_at < STALE_AFTER_BACK_S

    def lost(self, error: BaseException, operation: str) -> None:
        """A call (*operation*) failed on a lost connection: log it if it is the first."""
        now = time.monotonic()
        with self._lock:
            if self._since is None:
                self._since, self._failed, self._announced = now, 0, False
            self._failed += 1
            announce = not self._announced and now - self._back_at >= STALE_AFTER_BACK_S
        if announce and self._quiet is not None and self._quiet():
            announce = False
        if announce:
            with self._lock:
                self._announced = True
        reason = _WHITESPACE.sub(" ", failure_reason(error)).strip()
        if announce:
            log.warning(
                "worker %s: " + self._texts[0],
                self._name,
                operation,
                reason,
                self._retry_max,
                extra={"pgque_worker": self._name, "pgque_operation": operation},
            )
        else:
            log.debug("worker %s: %s failed again: %s", self._name, operation, reason)

    def reached(self, sent_at: float) -> None:
        """A call sent at *sent_at* (monotonic) got an answer: log the end of an outage.

        A call sent before the outage began says nothing about the server now: ignored.
        """
        since = self._since
        if since is None or sent_at < since:
            return
        now = time.monotonic()
        with self._lock:
            since, failed, announced = self._since, self._failed, self._announced
            if since is None:
                return
            self._since, self._failed = None, 0
            if announced:
                self._back_at = now
        if not announced:
            log.debug("worker %s: the next call answered (%d failed)", self._name, failed)
            return
        log.warning(
            "worker %s: " + self._texts[1],
            self._name,
            now - since,
            failed,
            extra={"pgque_worker": self._name},
        )


class SignalCounter:
    """Turn SIGINT/SIGTERM into stop requests: the first is graceful, any later one is not
    (the second stops at once, waiting only for handlers in threads, which cannot be stopped;
    the third leaves those running)."""

    def __init__(self, stop: Callable[[bool], None]) -> None:
        self._stop = stop
        self._lock = threading.Lock()
        self.received = 0

    def __call__(self, signum: int) -> None:
        """Handle signal *signum*."""
        with self._lock:
            self.received += 1
            received = self.received
        name = signal.Signals(signum).name
        if received == 1:
            log.warning("received %s: finishing in-flight messages (again to stop at once)", name)
        elif received == 2:
            log.warning(
                "received %s again: stopping at once (handlers running in threads cannot be "
                "stopped and are waited for; again to leave them running)",
                name,
            )
        else:
            log.warning("received %s again: leaving handlers that still run behind", name)
        self._stop(received == 1)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def watch_signals(on_signal: Callable[[int], None], loop: Any = None) -> Callable[[], None]:
    """Route SIGINT and SIGTERM to *on_signal*; return a function that undoes it.

    With an asyncio *loop*, *on_signal* runs in that loop; without, in a new thread: the
    interrupted main thread may hold locks that stopping a worker takes. Only the main thread
    may set signal handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        log.debug("not the main thread: signal handlers not installed")
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    if loop is not None:
        try:
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, on_signal, int(sig))
        except (NotImplementedError, RuntimeError):  # no loop signal support (Windows)
            return watch_signals(lambda s: loop.call_soon_threadsafe(on_signal, s))

        def undo_loop() -> None:
            for sig, old in previous.items():
                loop.remove_signal_handler(sig)
                if old is not None:
                    signal.signal(sig, old)

        return undo_loop

    def handler(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=on_signal, args=(signum,), name="pgque-signal").start()

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)

    def undo() -> None:
        for sig, old in previous.items():
            if old is not None:
                signal.signal(sig, old)

    return undo
