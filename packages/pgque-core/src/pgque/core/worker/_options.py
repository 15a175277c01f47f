"""The worker's options: :class:`WorkerOptions`, their defaults and their bounds.

Each bounded option's range is written once, in :data:`BOUNDS`: the options check against it
and the command line's flags take their ranges from it (a :class:`RetryPolicy`'s are in
:data:`~pgque.core.worker._policy.RETRY_BOUNDS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgque.core.errors import InvalidInput
from pgque.core.live_workers import (
    DEFAULT_HEARTBEAT_S,
    MAX_HEARTBEAT_S,
    MIN_HEARTBEAT_S,
    check_heartbeat_every,
)
from pgque.core.validation import MAX_BATCH, MAX_PRIORITY, MAX_VISIBILITY_S
from pgque.core.worker._bounds import Bounds
from pgque.core.worker._names import default_name
from pgque.core.worker._policy import Backoff, RetryPolicy

__all__ = [
    "EXTEND_FRACTION",
    "DEFAULT_HARD_TIMEOUT",
    "DEFAULT_PREFETCH",
    "RECONNECT_BACKOFF",
    "ERROR_JITTER",
    "BOUNDS",
    "WorkerOptions",
]

#: A held lease is renewed when this fraction of its visibility has passed, leaving the other
#: half as slack for a slow round trip or a busy machine.
EXTEND_FRACTION = 0.5

#: The longest a handler runs by default (``hard_timeout``; None disables it): a handler that
#: never returns must not hold its group, and retry, forever. Past it an asyncio handler is
#: cancelled; one in a thread cannot be, so its lease is kept until it returns; either way the
#: attempt counts, so ``max_attempts`` is reached in the end.
DEFAULT_HARD_TIMEOUT = 3600.0

#: The most leases a worker claims ahead of its slots, by default (``prefetch``; how many it
#: really keeps follows the rate its slots take them, see the claim batcher).
DEFAULT_PREFETCH = 64

#: Waits after a transport error: first, maximum (seconds). Bounded so that a worker resumes
#: within seconds of its server coming back.
RECONNECT_BACKOFF = (0.1, 5.0)
#: The jitter of those waits: two workers whose calls deadlocked each other (or that lost one
#: server together) must not retry in lockstep.
ERROR_JITTER = 0.5


#: The range of every bounded option of a worker, by keyword (durations in seconds: at most
#: one year).
BOUNDS: dict[str, Bounds] = {
    "concurrency": Bounds(1, 10_000),
    "prefetch": Bounds(0, MAX_BATCH),
    "visibility": Bounds(0, MAX_VISIBILITY_S, low_open=True),
    "batch_size": Bounds(1, MAX_BATCH),
    "min_priority": Bounds(0, MAX_PRIORITY),
    "hard_timeout": Bounds(0, MAX_VISIBILITY_S, low_open=True),
    "warn_after": Bounds(0, MAX_VISIBILITY_S, low_open=True),
    "shutdown_grace": Bounds(0, MAX_VISIBILITY_S),
    "heartbeat_every": Bounds(MIN_HEARTBEAT_S, MAX_HEARTBEAT_S),
}


def _seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number of seconds, not {value!r}")
    seconds = float(value)
    bounds = BOUNDS[name]
    if seconds != seconds or not bounds.holds(seconds):
        bound = "> 0" if bounds.low_open else ">= 0"
        raise InvalidInput(f"{name} must be {bound} and at most one year, not {value!r}")
    return seconds


def _int(value: object, name: str) -> int:
    low, high = int(BOUNDS[name].low), int(BOUNDS[name].high)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an int from {low} to {high}, not {value!r}")
    return value


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
    #: seconds between two heartbeats of the worker, on a transport that keeps live workers
    #: (``Capabilities.workers``; docs/workers.md)
    heartbeat_every: float = DEFAULT_HEARTBEAT_S

    def __post_init__(self) -> None:
        _int(self.concurrency, "concurrency")
        if self.prefetch is not None:
            _int(self.prefetch, "prefetch")
        _seconds(self.visibility, "visibility")
        _int(self.batch_size, "batch_size")
        _int(self.min_priority, "min_priority")
        if not isinstance(self.retry, RetryPolicy):
            raise InvalidInput(f"retry must be a RetryPolicy, not {type(self.retry).__name__}")
        if self.hard_timeout is not None:
            _seconds(self.hard_timeout, "hard_timeout")
        if self.warn_after is not None:
            _seconds(self.warn_after, "warn_after")
        _seconds(self.shutdown_grace, "shutdown_grace")
        check_heartbeat_every(self.heartbeat_every)
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
        heartbeat_every: float = DEFAULT_HEARTBEAT_S,
    ) -> WorkerOptions:
        """Validate and normalise the keyword options of a worker's constructor."""
        return cls(
            concurrency=concurrency,
            visibility=float(_seconds(visibility, "visibility")),
            batch_size=batch_size,
            min_priority=min_priority,
            retry=RetryPolicy() if retry is None else retry,
            hard_timeout=None if hard_timeout is None else _seconds(hard_timeout, "hard_timeout"),
            shutdown_grace=_seconds(shutdown_grace, "shutdown_grace"),
            idle_backoff=idle_backoff,
            name=default_name() if name is None else name,
            reconnect_backoff=reconnect_backoff,
            prefetch=prefetch,
            warn_after=None if warn_after is None else _seconds(warn_after, "warn_after"),
            heartbeat_every=check_heartbeat_every(heartbeat_every),
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
