"""When a worker run stops, decided without I/O: which of the run's signals a stop request
sets (:func:`stop_signals`), and when a run with ``stop_when_idle`` has found nothing left to
deliver (:func:`drained`, :class:`IdleStop`). Both twins of the worker loop (``_async.py`` and
its generated ``_sync.py``) ask these; they set the signals and make the calls."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pgque.core.models import QueueStats

__all__ = ["StopSignals", "stop_signals", "drained", "Idle", "IdleStop"]


@dataclass(frozen=True)
class StopSignals:
    """The signals of a run a stop request sets: *stopping* (claim no more), *abort* (give
    in-flight handlers up) and *abandon* (return without the handlers that cannot be
    stopped)."""

    stopping: bool
    abort: bool
    abandon: bool


def stop_signals(graceful: bool, aborted: bool) -> StopSignals:
    """Return the signals a stop request sets in a run whose handlers are given up already
    (*aborted*) or not: every request stops the claims; one that is not *graceful* gives the
    in-flight handlers up, and, asked again once they are, leaves behind the ones that cannot
    be stopped (threads)."""
    return StopSignals(stopping=True, abort=not graceful, abandon=not graceful and aborted)


def drained(stats: QueueStats) -> bool:
    """Return True if nothing in the queue *stats* describe can become deliverable without an
    operator: no parked group (a retry waiting for its delay), no message in flight elsewhere
    (blocked and paused groups do not count)."""
    return stats.parked == 0 and stats.in_flight == 0


class Idle(enum.Enum):
    """What a slot of a ``stop_when_idle`` run does after a claim that found nothing."""

    #: wait before claiming again (idle backoff, or a wake-up)
    WAIT = "wait"
    #: claim again at once: the queue looked drained, and a second empty claim confirms it
    CONFIRM = "confirm"
    #: the queue is drained: the run stops
    STOP = "stop"


class IdleStop:
    """The confirmation one slot of a ``stop_when_idle`` run keeps: stats are read after an
    empty claim, so a park that ends in between looks drained while its group is claimable;
    only a second empty claim after such stats confirms that nothing is left."""

    def __init__(self) -> None:
        self.confirming = False

    def claimed(self) -> None:
        """The slot's claim brought leases: what it saw before is stale."""
        self.confirming = False

    def empty(self, drained: bool) -> Idle:
        """Return what to do after an empty claim; *drained*: no slot of the run is busy and
        the queue is :func:`drained` (False when the run does not stop when idle)."""
        if not drained:
            self.confirming = False
            return Idle.WAIT
        if self.confirming:
            return Idle.STOP
        self.confirming = True
        return Idle.CONFIRM
