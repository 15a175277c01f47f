"""What one run of a worker tells the world (:class:`RunReport`): its counts, the hooks, the
end of each handler's span and the logs; and :class:`SafeHooks`, which calls the user's hooks
without letting them fail the worker."""

from __future__ import annotations

import logging
import time
from typing import Any

from pgque.core.errors import ConnectionLost, InvalidInput
from pgque.core.models import Lease
from pgque.core.tracing import WorkerTracing
from pgque.core.worker._logs import failure_reason, lease_fields, log
from pgque.core.worker._outcome import Outcome, Tally
from pgque.core.worker._reachability import Reachability
from pgque.core.worker.hooks import WorkerHooks

__all__ = ["SafeHooks", "RunReport"]


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


class RunReport:
    """The counts, hooks, spans and logs of one run of worker *name*.

    The claiming, running and settling parts of the worker each tell it what happened to
    the leases they hold; nothing here calls back into them. *reach* tracks whether the
    server answers (one WARNING when it stops, one when it is back).
    """

    def __init__(
        self, name: str, hooks: SafeHooks, tracing: WorkerTracing, reach: Reachability
    ) -> None:
        self.name = name
        self.hooks = hooks
        self.tracing = tracing
        self.reach = reach
        self.tally = Tally()

    def claimed(self, leases: list[Lease]) -> None:
        """Count the leases a call brought back (for slots or the buffer)."""
        self.tally.add_claimed(len(leases))
        if self.hooks.hooks is not None:
            for lease in leases:
                self.hooks.claimed(lease)

    def finished(
        self, outcome: Outcome, started: float, lease: Lease, timed_out: bool = False
    ) -> None:
        """Count a lease's *outcome* (*timed_out*: its handler was stopped at hard_timeout)."""
        duration = time.monotonic() - started
        self.tally.add(outcome, timed_out=timed_out)
        self.tracing.finish(lease, outcome.value)
        if self.hooks.hooks is not None:
            self.hooks.outcome(outcome, duration, lease)
        if not log.isEnabledFor(logging.DEBUG):
            return
        log.debug(
            "worker %s: message %s %s in %.3fs",
            self.name,
            lease.message_id,
            outcome.value,
            duration,
            extra=lease_fields(lease, outcome=outcome.value, duration_s=duration),
        )

    def transport_error(self, error: BaseException, lease: Lease | None, operation: str) -> None:
        """Count and log a failed server call (*operation*; *lease*: the lease concerned)."""
        self.tally.add_error()
        self.hooks.error(error, lease)
        if isinstance(error, ConnectionLost):  # an outage: logged once, when it begins
            self.reach.lost(error, operation)
            return
        log.warning(
            "worker %s: %s failed: %s; backing off",
            self.name,
            operation,
            failure_reason(error),
            extra={"pgque_worker": self.name, "pgque_operation": operation},
        )
