"""How a handler's run on a lease ends, decided without I/O: whether a lease arrives too late
to start (:func:`arrives_late`), when the runner next wakes while the handler runs
(:func:`next_wake`) and what it does then (:func:`due`), how a handler that must end is
stopped (:func:`stop_by`), what a handler stopped at its hard timeout gets
(:func:`timed_out_decision`), what a handler's return or exception leads to (:func:`ended`)
and how its failure is told (:func:`failure_note`), when a stuck handler is reported next
(:func:`stuck`), and what becomes of its lease: settled, or counted lost (:func:`take`,
:func:`leave_running`).

The handler runner's generated pair (``runner_async.py`` and ``runner_sync.py``) asks these and
does what they say: it starts, waits for, stops and renews, logs and counts. Every time is the
worker's monotonic clock, passed in.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from pgque.core.models import Lease
from pgque.core.transport_options import OnExhausted
from pgque.core.worker._logs import failure_reason
from pgque.core.worker._outcome import Outcome
from pgque.core.worker._policy import Retry, RetryPolicy, StopWorker
from pgque.core.worker._running.held import Held, next_warning, start_margin
from pgque.core.worker._settling.decisions import (
    Decision,
    Finished,
    answered_outcome,
    decide,
    exhausted_text,
    is_timed_out,
    timed_out,
)

__all__ = [
    "Due",
    "StopBy",
    "Lost",
    "Ending",
    "FailureNote",
    "arrives_late",
    "next_wake",
    "due",
    "stop_by",
    "timed_out_decision",
    "ended",
    "failure_note",
    "stuck",
    "take",
    "leave_running",
]


def arrives_late(held: Held, now: float, visibility: float) -> float | None:
    """Return how long is left of the leases *held* if that is too little for a handler to
    start on one (another worker may hold its message by now); None if it may start."""
    left = held.expires_at - now
    return None if left >= start_margin(visibility) else left


def next_wake(
    now: float,
    next_renewal: float,
    deadline: float | None,
    warn_at: float | None,
    child_poll: float | None,
) -> float:
    """Return when the runner next looks at a running handler: the leases' next renewal, the
    handler's *deadline* (None: none, or it was given up already), its next stuck report
    (*warn_at*), and, while its child process is starting, *child_poll* seconds from *now*."""
    wake = min(t for t in (next_renewal, deadline, warn_at) if t is not None)
    return wake if child_poll is None else min(wake, now + child_poll)


class Due(enum.Enum):
    """What a runner that woke while its handler runs must do to it (besides renewing the
    leases and reporting it stuck, which it checks apart)."""

    NOTHING = "nothing"
    #: the run ends without the handler (it could not be stopped): its lease is left to expire
    LEAVE = "leave"
    #: the shutdown grace is over: stop the handler; its message is released
    RELEASE = "release"
    #: the handler overran its hard timeout: stop it; its message is nacked (timed out)
    TIME_OUT = "time_out"


def due(given_up: bool, abandoned: bool, aborted: bool, deadline: float | None, now: float) -> Due:
    """Return what a runner that woke at *now* does to a handler still running.

    A handler already *given_up* (told to stop) is waited for until the run is *abandoned*,
    then left running. One not given up yet is stopped once the run is *aborted* (its
    message released), else once *now* reaches its *deadline* (timed out).
    """
    if given_up:
        return Due.LEAVE if abandoned else Due.NOTHING
    if aborted:
        return Due.RELEASE
    if deadline is not None and now >= deadline:
        return Due.TIME_OUT
    return Due.NOTHING


class StopBy(enum.Enum):
    """How a handler that must end is stopped."""

    #: it runs in a child process: the process is killed
    KILL = "kill"
    #: it is an asyncio task: the task is cancelled
    CANCEL = "cancel"
    #: it runs in a thread, which cannot be stopped: its lease is kept (renewed) until it
    #: returns, and that is reported
    KEEP = "keep"


def stop_by(in_process: bool, cancellable: bool) -> StopBy:
    """Return how a handler that must end is stopped: killed if it runs *in_process*, else
    cancelled if it is *cancellable* (a task), else kept (a thread)."""
    if in_process:
        return StopBy.KILL
    return StopBy.CANCEL if cancellable else StopBy.KEEP


def timed_out_decision(
    limit: float | None,
    lease: Lease,
    policy: RetryPolicy,
    max_attempts: int | None,
    on_exhausted: OnExhausted,
) -> tuple[Decision, str]:
    """Return the decision for a handler stopped at its hard timeout (*limit* seconds; see
    settling's ``timed_out``) and what follows for its message, for logs."""
    decision = timed_out(limit, lease, policy, max_attempts)
    if decision.final:
        return decision, exhausted_text(on_exhausted, max_attempts)
    return decision, f"it comes back in {decision.delay:g} s"


@dataclass(frozen=True)
class Ending:
    """What a handler's run leads to: the *decision* its lease is settled by, the
    :class:`StopWorker` it raised (the worker stops for it), and the *failure* to log (the
    error a failed handler raised; None when there is nothing to say)."""

    decision: Decision
    stop: StopWorker | None = None
    failure: BaseException | None = None


def ended(
    given_up: Decision | None,
    error: BaseException | None,
    stopped: bool,
    lease: Lease,
    policy: RetryPolicy,
    max_attempts: int | None,
) -> Ending:
    """Return what a handler's run leads to, now that it is over.

    *given_up*: the decision taken when the handler was told to stop (None: it was not);
    *error*: what it raised (None: it returned); *stopped*: it was cancelled or killed. A
    handler timed out, or given up and stopped, is settled as decided then; one that raised
    :class:`StopWorker` is released (its message is not at fault) and stops the worker; any
    other is settled by what it did (:func:`~pgque.core.worker._settling.decisions.decide`),
    even one given up that returned before it could be stopped.
    """
    if given_up is not None and (given_up.outcome is Outcome.TIMED_OUT or stopped):
        return Ending(given_up)
    if isinstance(error, StopWorker):
        return Ending(Decision(Outcome.RELEASED), stop=error)
    return Ending(decide(error, lease, policy, max_attempts), failure=error)


@dataclass(frozen=True)
class FailureNote:
    """How a handler's failure is logged: at *level*, *text* (``%``-style, after ``worker
    NAME: ``) with *args*, and the traceback of *traceback* (None: none)."""

    level: int
    text: str
    args: tuple[object, ...]
    traceback: BaseException | None = None


def failure_note(
    lease: Lease,
    error: BaseException,
    decision: Decision,
    on_exhausted: OnExhausted,
    max_attempts: int | None,
) -> FailureNote:
    """Return how the failure of the handler on *lease*, which raised *error* and led to
    *decision*, is logged: a rejection names its reason; a failure on the last attempt says
    what the transport does next (*on_exhausted*); a :class:`Retry` asked for is no warning;
    any other failure says when it is retried. A :class:`Retry` shows no traceback."""
    message = lease.message_id
    if decision.outcome is Outcome.DEAD_LETTERED:
        return FailureNote(
            logging.WARNING, "handler rejected message %s: %s", (message, decision.reason)
        )
    if decision.final:
        return FailureNote(
            logging.WARNING,
            "handler failed on message %s (attempt %d): %s; %s",
            (
                message,
                lease.attempt,
                failure_reason(error),
                exhausted_text(on_exhausted, max_attempts),
            ),
            None if isinstance(error, Retry) else error,
        )
    if isinstance(error, Retry):
        return FailureNote(
            logging.INFO, "handler asked to retry message %s in %gs", (message, decision.delay)
        )
    return FailureNote(
        logging.WARNING,
        "handler failed on message %s (attempt %d): %s; retry in %.3gs",
        (message, lease.attempt, failure_reason(error), decision.delay),
        error,
    )


def stuck(started: float, warn_at: float, every: float, now: float) -> tuple[float, float]:
    """Return how long a handler started at *started* has run at *now*, reported stuck at
    *warn_at*, and when it is reported next (every *every* seconds)."""
    return now - started, next_warning(warn_at, every, now)


@dataclass(frozen=True)
class Lost:
    """A lease that ended after it was lost: it is not settled, only counted (as
    *outcome*; *timed_out*: its handler was stopped at its hard timeout)."""

    lease: Lease
    outcome: Outcome
    started: float
    timed_out: bool


def take(
    held: Held,
    key: int,
    decision: Decision,
    started: float,
    now: float,
    on_exhausted: OnExhausted,
) -> Finished | Lost:
    """Take lease *key* out of *held*, to be settled by *decision* (its handler started at
    *started*; 0: it never ran, and *now* counts as its start), or, if it was lost, counted
    as a settlement its store answered False (a timed-out handler's stays timed out)."""
    lease = held.held.pop(key)
    started = started or now
    if key in held.lost:
        counted = answered_outcome(decision, False, on_exhausted)  # lost, not settled
        return Lost(lease, counted, started, is_timed_out(decision))
    return Finished(lease, decision, started, held.expires_at)


def leave_running(held: Held, key: int) -> Lease:
    """Mark lease *key* of *held* lost, its handler left running as the run ends without it
    (its lease is neither renewed nor released: it expires, and that counts an attempt);
    return it."""
    held.lost.add(key)
    return held.held[key]
