"""Metrics hooks of the worker: :class:`WorkerHooks` (the interface, every method a no-op),
:class:`MetricsHooks` (counters and timings in memory) and :class:`CompositeHooks`.

Hooks are called from the worker's threads (``Worker``) or its event loop (``AsyncWorker``),
synchronously, on the hot path: keep them quick and thread-safe. An exception raised by a hook
is logged and ignored, never allowed to stop the worker.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from pgque.core.models import Lease
from pgque.core.worker._outcome import Outcome

__all__ = ["WorkerHooks", "MetricsHooks", "CompositeHooks", "Timing"]


class WorkerHooks:
    """Callbacks a worker makes; subclass and override what you need (all default to no-op)."""

    def on_claimed(self, lease: Lease) -> None:
        """Call when a message was claimed, before its handler starts."""

    def on_outcome(self, outcome: Outcome, duration_s: float, lease: Lease) -> None:
        """Call when a claimed message was settled; *duration_s* runs from claim to settle."""

    def on_error(self, error: BaseException, lease: Lease | None) -> None:
        """Call when a transport call failed (the worker backs off and goes on).

        *lease* is the lease concerned, or None for a failed claim or wait.
        """

    def on_stuck(self, lease: Lease, running_s: float) -> None:
        """Call when the handler of *lease* has run for *running_s* seconds, past the worker's
        ``warn_after``: once when it crosses it, then once per ``warn_after`` while it runs.
        """

    def on_unstoppable(self, lease: Lease, running_s: float) -> None:
        """Call when the handler of *lease* must stop (the shutdown grace is over, or it ran
        past ``hard_timeout``) but runs in a thread, which cannot be stopped: its lease is kept
        (renewed) and its group held until it returns; *running_s* is how long it has run.
        Its outcome follows with :meth:`on_outcome` once it returns.
        """


@dataclass(frozen=True)
class Timing:
    """Handler-to-settle durations of one outcome: count, total, min and max in seconds."""

    count: int = 0
    total_s: float = 0.0
    min_s: float = 0.0
    max_s: float = 0.0

    @property
    def mean_s(self) -> float:
        """Return the mean duration (0 when nothing was counted)."""
        return self.total_s / self.count if self.count else 0.0

    def add(self, duration_s: float) -> Timing:
        """Return a copy with *duration_s* counted."""
        if not self.count:
            return Timing(1, duration_s, duration_s, duration_s)
        return Timing(
            self.count + 1,
            self.total_s + duration_s,
            min(self.min_s, duration_s),
            max(self.max_s, duration_s),
        )


class MetricsHooks(WorkerHooks):
    """Count claims, outcomes and errors and time each outcome, in memory (thread-safe).

    Read :attr:`claimed`, :meth:`count`, :meth:`timing` and :attr:`errors` at any time, or
    :meth:`snapshot` for a plain dict.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.claimed = 0
        #: how many times a handler was reported running past ``warn_after``
        self.stuck = 0
        #: how many handlers had to stop but could not (threads), their leases kept
        self.unstoppable = 0
        self.errors: dict[str, int] = {}
        self._counts: dict[Outcome, int] = dict.fromkeys(Outcome, 0)
        self._timings: dict[Outcome, Timing] = dict.fromkeys(Outcome, Timing())

    def on_claimed(self, lease: Lease) -> None:
        """Count a claim."""
        with self._lock:
            self.claimed += 1

    def on_outcome(self, outcome: Outcome, duration_s: float, lease: Lease) -> None:
        """Count *outcome* and add its duration to its timing."""
        with self._lock:
            self._counts[outcome] += 1
            self._timings[outcome] = self._timings[outcome].add(duration_s)

    def on_error(self, error: BaseException, lease: Lease | None) -> None:
        """Count an error by its class name."""
        name = type(error).__name__
        with self._lock:
            self.errors[name] = self.errors.get(name, 0) + 1

    def on_stuck(self, lease: Lease, running_s: float) -> None:
        """Count a report of a handler running past ``warn_after``."""
        with self._lock:
            self.stuck += 1

    def on_unstoppable(self, lease: Lease, running_s: float) -> None:
        """Count a handler that had to stop but runs on in its thread."""
        with self._lock:
            self.unstoppable += 1

    def count(self, outcome: Outcome | str) -> int:
        """Return how many messages ended with *outcome*."""
        with self._lock:
            return self._counts[Outcome(outcome)]

    def timing(self, outcome: Outcome | str) -> Timing:
        """Return the timing of *outcome*."""
        with self._lock:
            return self._timings[Outcome(outcome)]

    def snapshot(self) -> dict[str, object]:
        """Return every counter and timing as plain values."""
        with self._lock:
            return {
                "claimed": self.claimed,
                "stuck": self.stuck,
                "unstoppable": self.unstoppable,
                "errors": dict(self.errors),
                "outcomes": {o.value: n for o, n in self._counts.items()},
                "timings": {
                    o.value: {
                        "count": t.count,
                        "total_s": t.total_s,
                        "min_s": t.min_s,
                        "max_s": t.max_s,
                        "mean_s": t.mean_s,
                    }
                    for o, t in self._timings.items()
                },
            }


class CompositeHooks(WorkerHooks):
    """Forward every callback to several hooks, in order."""

    def __init__(self, hooks: Iterable[WorkerHooks]) -> None:
        self.hooks = tuple(hooks)

    def on_claimed(self, lease: Lease) -> None:
        """Forward to every hook."""
        for hook in self.hooks:
            hook.on_claimed(lease)

    def on_outcome(self, outcome: Outcome, duration_s: float, lease: Lease) -> None:
        """Forward to every hook."""
        for hook in self.hooks:
            hook.on_outcome(outcome, duration_s, lease)

    def on_error(self, error: BaseException, lease: Lease | None) -> None:
        """Forward to every hook."""
        for hook in self.hooks:
            hook.on_error(error, lease)

    def on_stuck(self, lease: Lease, running_s: float) -> None:
        """Forward to every hook (those written before ``on_stuck`` existed may lack it)."""
        for hook in self.hooks:
            on_stuck = getattr(hook, "on_stuck", None)
            if on_stuck is not None:
                on_stuck(lease, running_s)

    def on_unstoppable(self, lease: Lease, running_s: float) -> None:
        """Forward to every hook (those written before ``on_unstoppable`` existed may lack it)."""
        for hook in self.hooks:
            on_unstoppable = getattr(hook, "on_unstoppable", None)
            if on_unstoppable is not None:
                on_unstoppable(lease, running_s)
