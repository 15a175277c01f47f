"""The leases one slot holds while its handler runs, and their times, without I/O: whether a
lease still lasts long enough to start (:func:`start_margin`), when the leases are next renewed
and when they end (:class:`Held`), and when a handler still running is next reported
(:func:`next_warning`). Every time is the worker's monotonic clock, measured from before the
claim or the renewal was sent."""

from __future__ import annotations

from collections.abc import Sequence

from pgque.core.models import Lease
from pgque.core.worker._options import WorkerOptions

__all__ = ["Held", "start_margin", "next_warning", "START_MARGIN_S"]

#: A lease is started only with at least this long left of it by the worker's own clock
#: (measured from when its claim was *sent*), and at most a tenth of the visibility: one that
#: arrives later may already be another worker's, so its handler never starts.
START_MARGIN_S = 0.5


def start_margin(visibility: float) -> float:
    """Return how long a lease must still last, by the local clock, for its handler to start."""
    return min(START_MARGIN_S, visibility / 10)


class Held:
    """The leases one slot holds: those of one claim, run one after another."""

    def __init__(self, leases: Sequence[Lease], claimed_at: float, options: WorkerOptions) -> None:
        self.held: dict[int, Lease] = dict(enumerate(leases))
        self.lost: set[int] = set()
        #: when the leases must next be renewed, and when they expire at the latest
        #: (local monotonic estimates, measured from before the claim or extend was sent)
        self.renewed_at = claimed_at
        self.next_renewal = claimed_at + options.extend_every
        self.expires_at = claimed_at + options.visibility

    def renewed(self, sent: float, options: WorkerOptions) -> None:
        """The leases were renewed by calls sent at *sent*: they last a visibility from then."""
        self.renewed_at = sent
        self.expires_at = sent + options.visibility
        self.next_renewal = sent + options.extend_every

    def renewal_failed(self, now: float, options: WorkerOptions) -> None:
        """A renewal failed at *now*: the old leases still hold until they expire, so the next
        try comes soon, not in half a lease."""
        self.next_renewal = now + min(1.0, options.extend_every / 4)


def next_warning(warn_at: float, every: float, now: float) -> float:
    """Return when a handler reported as stuck at *warn_at* is reported next: *every* seconds
    later, at most once per interval (a slot that woke late, after a slow renewal, skips the
    reports it missed)."""
    following = warn_at + every
    return following if following > now else now + every
