"""Claiming: the leases a worker's slots run come from here.

Slots ask the claim batcher for leases (:meth:`AsyncClaimBatcher.take`). A few batcher loops
(tasks; threads in the blocking twin) turn whatever waits into round trips
(``settle_and_claim``): a claim for every slot that waits, plus enough to keep a small buffer
of leases ready (the *prefetch*) so that a slot that finishes takes its next lease at once,
and every settlement the run's settlement batch holds at that moment, which so rides on the
claim. One call per loop is out at a time; while it is out, what arrives waits for the next
one, so a busy worker batches by itself and an idle one adds no delay.

A lease waiting in the buffer is counted against its visibility from the moment its claim
was sent: past *hold* seconds unclaimed by a slot it is released (back at once for any
worker, the attempt not counted), so the buffer never keeps a group from others for long and
never hands a slot a lease that is about to expire.

What to claim and settle, how big the buffer is and what a failed call becomes are decided
without I/O in :mod:`~pgque.core.worker._claiming.planning`; this module waits, makes the
calls and hands out their answers.
"""

# The source of its blocking twin, batcher_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio  # async-only
import collections

# sync: import concurrent.futures
import threading
import time
from collections.abc import Callable

from pgque.core.contract import AsyncTransport
from pgque.core.errors import ConnectionLost, PartlySettled
from pgque.core.models import Lease, Settlement
from pgque.core.validation import MAX_BATCH
from pgque.core.worker._claiming.planning import (
    ClaimPlan,
    LeaseBuffer,
    PartlyApplied,
    next_plan,
    sent_apart,
    serve_waiting,
    split_partly,
)
from pgque.core.worker._claiming.round_trip_async import AsyncRoundTrip
from pgque.core.worker._logs import log
from pgque.core.worker._options import ERROR_JITTER, WorkerOptions
from pgque.core.worker._policy import Backoff
from pgque.core.worker._report import RunReport
from pgque.core.worker._settling.batch_async import AsyncSettlementBatch
from pgque.core.worker._settling.decisions import released, settlement_for
from pgque.core.worker._waiting_async import first, pause, resolve, wait_event

__all__ = ["AsyncClaimBatcher"]


class _Want:
    """A slot waiting for up to *count* leases."""

    __slots__ = ("abandoned", "count", "done", "error", "holder", "leases", "sent_at")

    def __init__(self, holder: str, count: int, done: asyncio.Future[None]) -> None:
        self.holder = holder
        self.count = count
        self.done = done
        self.leases: list[Lease] = []
        self.sent_at = 0.0
        self.error: BaseException | None = None
        #: the slot stopped waiting (the run aborted): leases the call brings back for it are
        #: released, not dropped
        self.abandoned = False


#: What one call carries (see :class:`~pgque.core.worker._claiming.planning.ClaimPlan`).
_Plan = ClaimPlan[_Want]


class AsyncClaimBatcher:
    """Claim for the slots of one worker run, carrying its settlements (see the module
    docstring).

    *settling* holds the run's finished leases: each round trip takes what waits there and
    hands back each result. *report* counts the leases claimed and the calls that failed.
    *buffer_holder*: the ``holder`` of leases claimed for the buffer (at most the options'
    ``buffer_size`` beyond the slots that wait). *new_future* makes the futures slots wait on;
    *abort* and *stopping* are the run's.
    """

    def __init__(
        self,
        transport: AsyncTransport,
        settling: AsyncSettlementBatch,
        options: WorkerOptions,
        report: RunReport,
        *,
        buffer_holder: str,
        new_future: Callable[[], asyncio.Future[None]],
        stopping: asyncio.Future[None],
        abort: asyncio.Future[None],
    ) -> None:
        self._round_trip = AsyncRoundTrip(transport, options, report.reach)
        #: a transport whose batches are not atomic (shards): a lost part fails alone
        self._split_when_lost = not getattr(transport.capabilities, "atomic_batches", True)
        self._settling = settling
        self._options = options
        self._report = report
        self._buffer_holder = buffer_holder
        self._new_future = new_future
        self._stopping = stopping
        self._abort = abort
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        settling.on_put(self._wake.set)
        self._wants: collections.deque[_Want] = collections.deque()
        #: leased for no slot yet (guarded by the lock)
        self._buffer = LeaseBuffer(options)
        self._calls = 0
        self._closing = False

    # ------------------------------------------------------------------ slots' side

    async def take(self, holder: str, count: int) -> tuple[list[Lease], float]:
        """Return up to *count* leases and when their claim was sent (monotonic clock):
        from the buffer if it holds any, else from the next call ([] if none was
        claimable). Raises what that call raised."""
        with self._lock:
            if self._buffer and not self._wants:
                leases, sent_at, expired = self._buffer.serve(count, time.monotonic())
                if expired:
                    self._settling.add(expired)
                    self._wake.set()  # leases past their hold wait to be released
                if leases:
                    return leases, sent_at
            want = _Want(holder, count, self._new_future())
            self._wants.append(want)
        self._wake.set()
        await first(want.done, self._abort)
        with self._lock:  # the call's answer is handed out under the lock too
            if not want.done.done():  # aborted: no more leases for this slot
                want.abandoned = True  # what its call brings back is released, not dropped
                return [], time.monotonic()
        if want.error is not None:
            raise want.error
        return want.leases, want.sent_at

    def busy(self) -> bool:
        """Return True while a settlement, a call or a buffered lease is outstanding."""
        with self._lock:
            return bool(len(self._settling) or self._calls or self._buffer)

    def close(self) -> None:
        """No slot is left: send what is pending, release the buffer, and end the loops."""
        with self._lock:
            self._closing = True
        self._wake.set()

    def wake(self) -> None:
        """Have a loop look at what waits now (a stop request releases the buffer at once)."""
        self._wake.set()

    # ------------------------------------------------------------------ the loops

    async def loop(self) -> None:
        """One batcher loop: plan a call from what waits, make it, repeat; end on close."""
        errors = Backoff(*self._options.reconnect_backoff, jitter=ERROR_JITTER)
        while True:
            timeout = self._next_expiry()
            await wait_event(self._wake, timeout)
            self._wake.clear()
            # sync: time.sleep(0)  # let slot threads that finished just now join this call
            while True:
                with self._lock:
                    plan = self._plan(time.monotonic())
                    done = plan is None and self._closing and not self._buffer
                    if plan is not None:
                        self._calls += 1
                if plan is None:
                    break
                try:
                    ok = await self._perform(plan)
                except Exception as exc:  # a bug, or a transport that broke its contract
                    log.exception("pgque worker: a round trip failed unexpectedly")
                    self._failed(plan, exc)
                    ok = False
                finally:
                    with self._lock:
                        self._calls -= 1
                if ok:
                    errors.reset()
                else:
                    await pause(self._abort, errors.next())
            if done:
                self._wake.set()  # the other loops end too
                return

    def _next_expiry(self) -> float | None:
        with self._lock:
            return self._buffer.next_expiry(time.monotonic())

    def _plan(self, now: float) -> _Plan | None:
        """Take what the next call carries (lock held); None if there is nothing to send.
        Slots that wait take buffered leases first (:func:`~.planning.serve_waiting`); once
        the run stops, the buffer is given back and slots that wait get nothing."""
        stopping = self._stopping.done() or self._closing
        served, given_back = serve_waiting(self._wants, self._buffer, now, stopping=stopping)
        self._settling.add(given_back)
        for want, leases, sent_at in served:
            want.leases, want.sent_at = leases, sent_at
            resolve(want.done)
        # At most MAX_BATCH settlements and MAX_BATCH leases a call: the rest waits for the
        # next one.
        finished = self._settling.take(MAX_BATCH)
        holder = self._buffer_holder
        plan, turned_away = next_plan(
            self._wants, finished, self._buffer, holder, now, stopping=stopping
        )
        for want in turned_away:
            resolve(want.done)
        return plan

    async def _perform(self, plan: _Plan) -> bool:
        """Make the call of *plan*; hand out its answer. Return False if it failed."""
        sent = time.monotonic()
        settlements = [settlement_for(f.lease, f.decision) for f in plan.finished]
        try:
            result = await self._round_trip(settlements, plan.holders)
        except PartlyApplied as part:
            self._partly(plan, part)
            return False
        except Exception as exc:
            if isinstance(exc, PartlySettled) and len(exc.settled) == len(plan.finished):
                # The shards that answered applied theirs: count those, resend only the rest.
                plan = plan.with_finished(self._settling.known(plan.finished, exc.settled))
                settlements = [settlement_for(f.lease, f.decision) for f in plan.finished]
            if isinstance(exc, ConnectionLost) and exc.maybe_applied:
                for finished in plan.finished:
                    finished.ambiguous = True
            if sent_apart(exc, plan.parts, split_when_lost=self._split_when_lost):
                await self._each_alone(plan, settlements, exc)
            else:
                self._failed(plan, exc)
            return False
        plan.check_answer(len(result.settled), len(result.leases))
        await self._settling.results(plan.finished, result.settled)
        if result.leases:
            self._report.claimed(result.leases)
        shares, rest = plan.share(result.leases)
        now = time.monotonic()
        with self._lock:
            for want, leases in zip(plan.wants, shares, strict=True):
                want.leases = leases
                want.sent_at = sent
                if want.abandoned:  # its slot is gone (aborted): give the leases back now
                    expires_at = sent + self._options.visibility
                    self._settling.add([released(x, now, expires_at) for x in want.leases])
                    want.leases = []
                resolve(want.done)
            self._buffer.took(sum(len(want.leases) for want in plan.wants), now)
            self._buffer.answered(plan.buffered)
            self._buffer.add(rest, sent)
            if self._buffer or len(self._settling):
                self._wake.set()  # a slot may be waiting already, or the hold must be watched
        return True

    def _failed(self, plan: _Plan, error: BaseException) -> None:
        """A call failed: report it once, fail its waiting slots; its settlements wait for the
        next call when they may be retried (after a lost connection or a conflict, until the
        lease ends)."""
        self._report.transport_error(error, plan.lease, plan.operation())
        self._settling.failed(plan.finished, error)
        with self._lock:
            self._buffer.answered(plan.buffered)
        for want in plan.wants:
            want.error = error
            resolve(want.done)

    def _partly(self, plan: _Plan, part: PartlyApplied) -> None:
        """Count what a call made of single calls did before it failed; fail the rest
        (:func:`~.planning.split_partly` splits it)."""
        now = time.monotonic()
        answered, rest, given_back = split_partly(plan, part, now, self._options.visibility)
        for finished, ok in answered:
            self._settling.answered(finished, ok)
        if given_back:  # claimed before the failure: nobody will run them; give them back
            self._settling.add(given_back)
            self._report.claimed(part.leases)
        self._failed(rest, part.error)

    async def _each_alone(
        self, plan: _Plan, settlements: list[Settlement], error: BaseException
    ) -> None:
        """A call was refused for good (or, over shards, lost on one of them): report it, then
        make each of its settlements, and its claim, a call of its own, so that one bad part
        fails alone."""
        self._report.transport_error(error, plan.lease, plan.operation())
        for finished, settlement in zip(plan.finished, settlements, strict=True):
            part: _Plan = ClaimPlan(finished=[finished])
            try:
                result = await self._round_trip([settlement], [])
                done = bool(result.settled[0])
            except Exception as exc:
                self._failed(part, exc)
                continue
            await self._settling.results([finished], [done])
        with self._lock:
            self._buffer.answered(plan.buffered)
        if not plan.wants:
            return
        await self._perform(plan.claim_alone())
