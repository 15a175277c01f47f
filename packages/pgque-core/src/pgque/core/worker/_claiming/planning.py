"""Claiming's decisions, without I/O: how many leases the buffer keeps and how long one waits
there (:class:`LeaseBuffer`), which waiting slots it serves (:func:`serve_waiting`), what each
round trip carries (:class:`ClaimPlan`, :func:`next_plan`, :func:`plan_claims`,
:func:`holder_runs`), and what becomes of one that failed (:func:`sent_apart`) or failed part
of the way (:class:`PartlyApplied`, :func:`split_partly`).

Claiming's generated pairs (the claim batcher, ``batcher_async.py`` and ``batcher_sync.py``,
and the round trip) keep their state here and ask it; they only wait, make the calls and hand
out the answers.
Every time is the caller's monotonic clock, passed in.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, Protocol, TypeVar

from pgque.core.errors import ConnectionLost, PgqueError, RetryableConflict
from pgque.core.models import Lease
from pgque.core.validation import MAX_BATCH
from pgque.core.worker._options import WorkerOptions
from pgque.core.worker._settling.decisions import SETTLE_VERB, Finished, Unused, released

__all__ = [
    "BUFFER_HOLD",
    "BUFFER_HORIZON",
    "LeaseBuffer",
    "Want",
    "ClaimPlan",
    "PartlyApplied",
    "serve_waiting",
    "next_plan",
    "plan_claims",
    "sent_apart",
    "split_partly",
    "holder_runs",
]

#: The longest a lease waits in the buffer for a slot, in seconds (and at most a quarter of
#: the visibility): then it is released.
BUFFER_HOLD = 2.0
#: The buffer holds what the slots take in this many seconds, at the rate they took leases
#: lately (at least one lease, at most *prefetch*): a fast worker keeps many ready, a slow
#: one keeps a few, so no lease waits long and no group is kept from other workers.
BUFFER_HORIZON = 0.05
#: How many recent takes the rate is measured over.
_RATE_WINDOW = 128


class LeaseBuffer:
    """The leases claimed for no slot yet, oldest first, each with when its claim was sent;
    the rate slots took leases at lately, which sizes it; and how many leases calls still
    out asked for it. Not thread-safe: the batcher holds its lock around every call.
    """

    def __init__(self, options: WorkerOptions) -> None:
        #: the most leases it keeps (the options' ``buffer_size``)
        self.prefetch = options.buffer_size
        #: how long a lease may wait in it, in seconds
        self.hold = min(BUFFER_HOLD, options.visibility / 4)
        self._visibility = options.visibility
        #: its size until the slots have taken enough leases to measure their rate
        self._first_size = min(self.prefetch, options.concurrency * options.batch_size)
        self._leases: collections.deque[tuple[Lease, float]] = collections.deque()
        #: when slots took their recent leases, for the buffer's size
        self._takes: collections.deque[float] = collections.deque(maxlen=_RATE_WINDOW)
        #: leases asked for the buffer by calls still out
        self._asked = 0

    def __len__(self) -> int:
        """Return how many leases wait in the buffer."""
        return len(self._leases)

    def next_expiry(self, now: float) -> float | None:
        """Return how long until the oldest lease's hold ends (0 if it has); None if empty."""
        if not self._leases:
            return None
        return max(self._leases[0][1] + self.hold - now, 0.0)

    def expired(self, now: float) -> list[Finished]:
        """Take out the leases past their hold; return them as releases to settle."""
        expired: list[Finished] = []
        while self._leases and now - self._leases[0][1] >= self.hold:
            lease, sent = self._leases.popleft()
            expired.append(released(lease, now, sent + self._visibility))
        return expired

    def release_all(self, now: float) -> list[Finished]:
        """Take out every lease (the run stops); return them as releases to settle."""
        visibility = self._visibility
        out = [released(lease, now, sent + visibility) for lease, sent in self._leases]
        self._leases.clear()
        return out

    def pop(self, count: int, now: float) -> tuple[list[Lease], float]:
        """Take out up to *count* leases for a slot, oldest first; return them and when the
        oldest one's claim was sent (*now* if none). Counted as taken (:meth:`took`)."""
        leases: list[Lease] = []
        sent_at = now
        while self._leases and len(leases) < count:
            lease, sent = self._leases.popleft()
            leases.append(lease)
            sent_at = min(sent_at, sent)
        self.took(len(leases), now)
        return leases, sent_at

    def serve(self, count: int, now: float) -> tuple[list[Lease], float, list[Finished]]:
        """Take out the leases past their hold, then up to *count* leases for a slot (as
        :meth:`pop`); return those, when the oldest one's claim was sent, and the expired ones
        as releases to settle."""
        expired = self.expired(now)
        leases, sent_at = self.pop(count, now)
        return leases, sent_at, expired

    def took(self, count: int, now: float) -> None:
        """Note that slots took *count* leases at *now*."""
        self._takes.extend([now] * count)

    def size(self, now: float) -> int:
        """Return how many leases the buffer should hold now (see BUFFER_HORIZON)."""
        if self.prefetch == 0:
            return 0
        if len(self._takes) < 8:
            return self._first_size
        span = now - self._takes[0]
        if span <= 0:
            return self.prefetch
        rate = len(self._takes) / span
        return max(1, min(self.prefetch, math.ceil(rate * BUFFER_HORIZON)))

    def top_up(self, now: float, room: int) -> int:
        """Return how many leases the next call asks for the buffer, at most *room*: what it
        lacks beyond what calls still out asked for (counted as asked until :meth:`answered`)."""
        wanted = self.size(now) - len(self._leases) - self._asked
        asked = max(min(wanted, room), 0)
        self._asked += asked
        return asked

    def answered(self, asked: int) -> None:
        """A call that asked *asked* leases for the buffer is over (it brought them, or failed)."""
        self._asked -= asked

    def add(self, leases: Sequence[Lease], sent: float) -> None:
        """Keep *leases*, whose claim was sent at *sent*, for the slots to come."""
        self._leases.extend((lease, sent) for lease in leases)


class Want(Protocol):
    """A slot waiting for leases: the holder label its claims carry and how many it takes."""

    @property
    def holder(self) -> str: ...

    @property
    def count(self) -> int: ...


W = TypeVar("W", bound=Want)


@dataclass
class ClaimPlan(Generic[W]):
    """What one round trip carries: the settlements (*finished*), the slots it claims for
    (*wants*), how many leases it asks for the buffer (*buffered*), and the holder label of
    each lease it asks for (the slots' first, in their order, then the buffer's)."""

    finished: list[Finished] = field(default_factory=list)
    wants: list[W] = field(default_factory=list)
    buffered: int = 0
    holders: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True if the plan carries nothing: no call is made."""
        return not self.finished and not self.holders

    @property
    def parts(self) -> int:
        """How many calls the plan becomes when each part goes alone: one per settlement,
        and one for the claim."""
        return len(self.finished) + bool(self.holders)

    def with_finished(self, finished: list[Finished]) -> ClaimPlan[W]:
        """Return this plan carrying *finished* instead (its claim unchanged)."""
        return replace(self, finished=finished)

    def claim_alone(self) -> ClaimPlan[W]:
        """Return the plan of this one's claim for its slots alone (nothing for the buffer)."""
        holders = [h for want in self.wants for h in [want.holder] * want.count]
        return ClaimPlan(wants=self.wants, holders=holders)

    @property
    def lease(self) -> Lease | None:
        """The lease a failed call is reported with: its first settlement's (None: it only
        claimed)."""
        return self.finished[0].lease if self.finished else None

    def operation(self) -> str:
        """The name a failed call is reported with: what it settled, and whether it claimed."""
        claiming = " and claim" if self.holders else ""
        if not self.finished:
            return "claim"
        if len(self.finished) > 1:
            return f"settle ({len(self.finished)}){claiming}"
        outcome = self.finished[0].decision.outcome
        return SETTLE_VERB[outcome] + claiming

    def check_answer(self, settled: int, leases: int) -> None:
        """Raise PgqueError unless an answer of *settled* results and *leases* leases fits the
        plan (a transport that broke its contract)."""
        if settled != len(self.finished) or leases > len(self.holders):
            raise PgqueError(
                f"settle_and_claim answered {settled} results for "
                f"{len(self.finished)} settlements and {leases} leases for "
                f"{len(self.holders)}"
            )

    def share(self, leases: Sequence[Lease]) -> tuple[list[list[Lease]], list[Lease]]:
        """Split the leases a call brought: each slot's (in the plan's order, as the holders
        were), and the rest, for the buffer."""
        rest = iter(leases)
        shares = [list(itertools.islice(rest, want.count)) for want in self.wants]
        return shares, list(rest)


def serve_waiting(
    wants: collections.deque[W], buffer: LeaseBuffer, now: float, *, stopping: bool
) -> tuple[list[tuple[W, list[Lease], float]], list[Finished]]:
    """Serve the slots that wait (from the front of *wants*) from *buffer*, before a call is
    planned; return each slot served with its leases and when their claim was sent, and the
    leases the buffer gives back, as releases to settle: every one when the run is
    *stopping*, else those past their hold.

    A slot served takes what the buffer holds, up to its count (maybe none once the leases
    left expired: it is served, with nothing, and claims again).
    """
    given_back = buffer.release_all(now) if stopping else buffer.expired(now)
    served: list[tuple[W, list[Lease], float]] = []
    while wants and buffer:
        want = wants.popleft()
        leases, sent_at, expired = buffer.serve(want.count, now)
        given_back += expired
        served.append((want, leases, sent_at))
    return served, given_back


def next_plan(
    wants: collections.deque[W],
    finished: list[Finished],
    buffer: LeaseBuffer,
    buffer_holder: str,
    now: float,
    *,
    stopping: bool,
) -> tuple[ClaimPlan[W] | None, list[W]]:
    """Return the plan of the next call, carrying *finished* (None: there is nothing to
    send), and the slots it turns away (taken from *wants*: each gets no lease).

    While the run is *stopping* a call only settles, and every slot that waits is turned
    away; otherwise the call claims as :func:`plan_claims` says.
    """
    turned_away: list[W] = []
    if stopping:
        turned_away += wants  # no more claims: a waiting slot gets nothing
        wants.clear()
        plan: ClaimPlan[W] = ClaimPlan(finished=finished)
    else:
        plan = plan_claims(wants, finished, buffer, buffer_holder, now)
    return (None if plan.empty else plan), turned_away


def plan_claims(
    wants: collections.deque[W],
    finished: list[Finished],
    buffer: LeaseBuffer,
    buffer_holder: str,
    now: float,
) -> ClaimPlan[W]:
    """Return the plan of a call that carries *finished* and claims for the slots that wait
    (taken from the front of *wants*) and for the buffer (*buffer_holder*'s leases).

    At most MAX_BATCH leases a call: the slots that do not fit wait for the next one. The
    buffer is topped up when slots wait or hand back a lease they ran: never for a call that
    only gives back leases the buffer held too long (the slots are slow; claiming more would
    only churn).
    """
    plan: ClaimPlan[W] = ClaimPlan(finished=finished)
    while wants and len(plan.holders) + wants[0].count <= MAX_BATCH:
        want = wants.popleft()
        plan.wants.append(want)
        plan.holders += [want.holder] * want.count
    if plan.wants or any(not isinstance(f, Unused) for f in plan.finished):
        plan.buffered = buffer.top_up(now, MAX_BATCH - len(plan.holders))
        plan.holders += [buffer_holder] * plan.buffered
    return plan


def holder_runs(labels: Sequence[str]) -> list[tuple[str, int]]:
    """Return *labels* as (label, how many in a row) runs: on a transport without
    ``settle_and_claim``, one claim is made per run."""
    runs: list[tuple[str, int]] = []
    for label in labels:
        if runs and runs[-1][0] == label:
            runs[-1] = (label, runs[-1][1] + 1)
        else:
            runs.append((label, 1))
    return runs


class PartlyApplied(Exception):
    """A call made of single calls (a transport without ``settle_and_claim``) failed part of
    the way: *settled* are the results of the settlements made before the failure, *leases*
    the leases claimed; *error* is what the next one raised."""

    def __init__(
        self, settled: list[bool], error: Exception, leases: list[Lease] | None = None
    ) -> None:
        super().__init__(str(error))
        self.settled = settled
        self.error = error
        self.leases = leases or []


def split_partly(
    plan: ClaimPlan[W], part: PartlyApplied, now: float, visibility: float
) -> tuple[list[tuple[Finished, bool]], ClaimPlan[W], list[Finished]]:
    """Split *plan*, whose call *part* says failed part of the way at *now*: return the
    settlements made before the failure, each with its result; the plan of the rest, which
    failed (its claim too); and the leases claimed before the failure, as releases to settle
    (nobody will run them: they are given back)."""
    done = len(part.settled)
    answered = list(zip(plan.finished, part.settled, strict=False))
    given_back = [released(lease, now, now + visibility) for lease in part.leases]
    return answered, plan.with_finished(plan.finished[done:]), given_back


def sent_apart(error: BaseException, parts: int, *, split_when_lost: bool) -> bool:
    """Return True if the *parts* of a call that failed with *error* are sent again one by
    one, so that one bad part fails alone; False if the call fails whole (its settlements
    wait for the next call when they may be retried)."""
    if isinstance(error, ConnectionLost):
        # Over shards one that cannot be reached fails the whole call (its settlements first
        # of all): the parts go one by one, so the shards that answer settle and serve while
        # that shard's settlements wait for it.
        return split_when_lost and parts >= 2
    # A conflict fails the call whole (it was rolled back whole), as does a call of one part;
    # any other error refused the call for good: each part goes alone, so only its own fails.
    return not isinstance(error, RetryableConflict) and parts >= 2
