"""The worker's exchange: every server call a worker makes for its slots' leases.

Slots hand it their finished leases (:meth:`AsyncExchange.settle`, which never waits) and ask
it for new ones (:meth:`AsyncExchange.take`). A few exchange loops (tasks; threads in the
blocking twin) turn whatever is waiting into ``settle_and_claim`` calls: every settlement that
is ready and a claim for every slot that waits, plus enough to keep a small buffer of leases
ready (the *prefetch*) so that a slot that finishes takes its next lease at once. One call
per loop is out at a time; while it is out, what arrives waits for the next one, so a busy
worker batches by itself and an idle one adds no delay.

A lease waiting in the buffer is counted against its visibility from the moment its claim
was sent: past *hold* seconds unclaimed by a slot it is released (back at once for any
worker, the attempt not counted), so the buffer never keeps a group from others for long and
never hands a slot a lease that is about to expire. A settlement that fails on a lost
connection or a conflict is sent again, with bounded backoff, until its lease ends.
"""

# The source of its blocking twin, _exchange_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import asyncio  # async-only
import collections

# sync: import concurrent.futures
import contextlib  # async-only
import itertools
import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from pgque.core.errors import ConnectionLost, PartlySettled, PgqueError, RetryableConflict
from pgque.core.models import Lease, Settlement, SettleResult
from pgque.core.validation import MAX_BATCH
from pgque.core.worker._common import (
    ERROR_JITTER,
    SETTLE_VERB,
    Decision,
    WorkerOptions,
    log,
    settlement_for,
)
from pgque.core.worker._outcome import Outcome
from pgque.core.worker._policy import Backoff

__all__ = [
    "AsyncExchange",
    "Finished",
    "PartlyApplied",
    "Reporter",
    "BUFFER_HOLD",
    "pause",
    "resolve",
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


class Finished:
    """A lease whose handler is done (or that is given up), with what to do with it."""

    __slots__ = ("ambiguous", "decision", "expires_at", "lease", "started")

    def __init__(self, lease: Lease, decision: Decision, started: float, expires_at: float):
        self.lease = lease
        self.decision = decision
        self.started = started
        #: the lease's end by the local clock (its settlement is retried until then)
        self.expires_at = expires_at
        #: a call carrying it failed after it was sent (``maybe_applied``): a later False
        #: may mean it took effect then, so the store is asked before it is called lost
        self.ambiguous = False


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


class Reporter(Protocol):
    """What the exchange tells its worker."""

    def settled(self, finished: Finished, done: bool) -> None:
        """A settlement took effect (*done*) or found its lease gone."""

    def failed(self, error: BaseException, lease: Lease | None, operation: str) -> None:
        """A server call failed (reported once per call)."""

    def claimed(self, leases: list[Lease]) -> None:
        """A call leased *leases* (for slots or the buffer)."""


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


class _Plan:
    """What one call carries."""

    __slots__ = ("buffered", "finished", "holders", "wants")

    def __init__(self) -> None:
        self.finished: list[Finished] = []
        self.wants: list[_Want] = []
        self.buffered = 0
        self.holders: list[str] = []


class AsyncExchange:
    """Settle and claim for the slots of one worker run (see the module docstring).

    *call* makes one server call (``settle_and_claim``, or the worker's single calls on a
    transport without it). *prefetch*: at most how many leases to keep ready beyond the
    slots that wait. *buffer_holder*: the ``holder`` of leases claimed for the buffer. *new_future*
    makes the futures slots wait on; *abort* and *stopping* are the run's.
    """

    def __init__(
        self,
        call: Callable[[list[Settlement], list[str]], Awaitable[SettleResult]],
        options: WorkerOptions,
        reporter: Reporter,
        *,
        prefetch: int,
        buffer_holder: str,
        new_future: Callable[[], asyncio.Future[None]],
        stopping: asyncio.Future[None],
        abort: asyncio.Future[None],
        split_when_lost: bool = False,
        confirm: Callable[[Finished], Awaitable[bool]] | None = None,
    ) -> None:
        self._call = call
        #: asks the store whether an ambiguous settlement answered False took effect after all
        self._confirm = confirm
        #: a transport whose batches are not atomic (shards): a lost part fails alone
        self._split_when_lost = split_when_lost
        self._options = options
        self._reporter = reporter
        self._prefetch = prefetch
        self._buffer_holder = buffer_holder
        self._new_future = new_future
        self._stopping = stopping
        self._abort = abort
        self._hold = min(BUFFER_HOLD, options.visibility / 4)
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        self._settlements: list[Finished] = []
        self._wants: collections.deque[_Want] = collections.deque()
        #: leased for no slot yet, oldest first: (lease, when its claim was sent)
        self._buffer: collections.deque[tuple[Lease, float]] = collections.deque()
        #: leases asked for the buffer by calls still out
        self._asked_for_buffer = 0
        self._calls = 0
        self._closing = False
        #: when slots took their recent leases (monotonic clock), for the buffer's size
        self._takes: collections.deque[float] = collections.deque(maxlen=_RATE_WINDOW)
        self._first_size = min(prefetch, options.concurrency * options.batch_size)

    # ------------------------------------------------------------------ slots' side

    def settle(self, finished: Finished) -> None:
        """Queue *finished* for the next call; returns at once (its outcome is reported)."""
        with self._lock:
            self._settlements.append(finished)
        self._wake.set()

    async def take(self, holder: str, count: int) -> tuple[list[Lease], float]:
        """Return up to *count* leases and when their claim was sent (monotonic clock):
        from the buffer if it holds any, else from the next call ([] if none was
        claimable). Raises what that call raised."""
        with self._lock:
            if self._buffer and not self._wants:
                queued = len(self._settlements)
                leases, sent_at = self._from_buffer(count, time.monotonic())
                if len(self._settlements) > queued:
                    self._wake.set()  # leases past their hold wait to be released
                if leases:
                    return leases, sent_at
            want = _Want(holder, count, self._new_future())
            self._wants.append(want)
        self._wake.set()
        await _first(want.done, self._abort)
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
            return bool(self._settlements or self._calls or self._buffer)

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
        """One exchange loop: plan a call from what waits, make it, repeat; end on close."""
        errors = Backoff(*self._options.reconnect_backoff, jitter=ERROR_JITTER)
        while True:
            timeout = self._next_expiry()
            await _wait(self._wake, timeout)
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
                    log.exception("pgque worker: an exchange call failed unexpectedly")
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
            if not self._buffer:
                return None
            return max(self._buffer[0][1] + self._hold - time.monotonic(), 0.0)

    def _from_buffer(self, count: int, now: float) -> tuple[list[Lease], float]:
        """Pop up to *count* buffered leases still within their hold (lock held)."""
        self._expire(now)
        leases: list[Lease] = []
        sent_at = now
        while self._buffer and len(leases) < count:
            lease, sent = self._buffer.popleft()
            leases.append(lease)
            sent_at = min(sent_at, sent)
        self._took(len(leases), now)
        return leases, sent_at

    def _took(self, count: int, now: float) -> None:
        """Note that slots took *count* leases (lock held)."""
        self._takes.extend([now] * count)

    def _buffer_size(self, now: float) -> int:
        """How many leases the buffer should hold now (lock held; see BUFFER_HORIZON)."""
        if self._prefetch == 0:
            return 0
        if len(self._takes) < 8:
            return self._first_size
        span = now - self._takes[0]
        if span <= 0:
            return self._prefetch
        rate = len(self._takes) / span
        return max(1, min(self._prefetch, math.ceil(rate * BUFFER_HORIZON)))

    def _expire(self, now: float) -> None:
        """Queue the release of buffered leases past their hold (lock held)."""
        while self._buffer and now - self._buffer[0][1] >= self._hold:
            lease, sent = self._buffer.popleft()
            self._settlements.append(_released(lease, now, sent + self._options.visibility))

    def _plan(self, now: float) -> _Plan | None:
        """Take what the next call carries (lock held); None if there is nothing to send."""
        stopping = self._stopping.done() or self._closing
        if stopping:
            while self._buffer:
                lease, sent = self._buffer.popleft()
                self._settlements.append(_released(lease, now, sent + self._options.visibility))
        else:
            self._expire(now)
        # Slots that wait take buffered leases first.
        while self._wants and self._buffer:
            want = self._wants.popleft()
            want.leases, want.sent_at = self._from_buffer(want.count, now)
            resolve(want.done)
        plan = _Plan()
        # At most MAX_BATCH settlements and MAX_BATCH leases a call: the rest waits for the
        # next one.
        plan.finished = self._settlements[:MAX_BATCH]
        del self._settlements[:MAX_BATCH]
        if stopping:
            while self._wants:  # no more claims: a waiting slot gets nothing
                resolve(self._wants.popleft().done)
        else:
            while self._wants and len(plan.holders) + self._wants[0].count <= MAX_BATCH:
                want = self._wants.popleft()
                plan.wants.append(want)
                plan.holders += [want.holder] * want.count
            # Top the buffer up when slots wait or hand back a lease they ran: never for a
            # call that only gives back leases the buffer held too long (the slots are slow;
            # claiming more would only churn).
            if plan.wants or any(not isinstance(f, _Unused) for f in plan.finished):
                top_up = self._buffer_size(now) - len(self._buffer) - self._asked_for_buffer
                plan.buffered = max(min(top_up, MAX_BATCH - len(plan.holders)), 0)
                plan.holders += [self._buffer_holder] * plan.buffered
                self._asked_for_buffer += plan.buffered
        if not plan.finished and not plan.holders:
            return None
        return plan

    async def _perform(self, plan: _Plan) -> bool:
        """Make the call of *plan*; hand out its answer. Return False if it failed."""
        sent = time.monotonic()
        settlements = [settlement_for(f.lease, f.decision) for f in plan.finished]
        try:
            result = await self._call(settlements, plan.holders)
        except PartlyApplied as part:
            self._partly(plan, part)
            return False
        except Exception as exc:
            if isinstance(exc, PartlySettled) and len(exc.settled) == len(plan.finished):
                # The shards that answered applied theirs: count those, resend only the rest.
                plan = await self._known(plan, exc.settled)
                settlements = [settlement_for(f.lease, f.decision) for f in plan.finished]
            if isinstance(exc, ConnectionLost) and exc.maybe_applied:
                for finished in plan.finished:
                    finished.ambiguous = True
            parts = len(plan.finished) + bool(plan.holders)
            if self._split_when_lost and isinstance(exc, ConnectionLost) and parts >= 2:
                # Over shards one that cannot be reached fails the whole call (its
                # settlements first of all): the parts go one by one, so the shards that
                # answer settle and serve while that shard's settlements wait for it.
                await self._each_alone(plan, settlements, exc)
                return False
            if isinstance(exc, (ConnectionLost, RetryableConflict)) or parts < 2:
                self._failed(plan, exc)
                return False
            # Refused for good: send each part alone, so only its own part fails.
            await self._each_alone(plan, settlements, exc)
            return False
        if len(result.settled) != len(settlements) or len(result.leases) > len(plan.holders):
            raise PgqueError(
                f"settle_and_claim answered {len(result.settled)} results for "
                f"{len(settlements)} settlements and {len(result.leases)} leases for "
                f"{len(plan.holders)}"
            )
        for finished, done in zip(plan.finished, result.settled, strict=True):
            if done or not finished.ambiguous:
                self._reporter.settled(finished, done)
            else:  # rare: a settlement sent again after a lost reply
                await self._report(finished, done)
        if result.leases:
            self._reporter.claimed(result.leases)
        leases = iter(result.leases)
        now = time.monotonic()
        with self._lock:
            for want in plan.wants:
                want.leases = list(itertools.islice(leases, want.count))
                want.sent_at = sent
                if want.abandoned:  # its slot is gone (aborted): give the leases back now
                    expires_at = sent + self._options.visibility
                    self._settlements += [_released(x, now, expires_at) for x in want.leases]
                    want.leases = []
                resolve(want.done)
            self._took(sum(len(want.leases) for want in plan.wants), now)
            self._asked_for_buffer -= plan.buffered
            self._buffer.extend((lease, sent) for lease in leases)
            if self._buffer or self._settlements:
                self._wake.set()  # a slot may be waiting already, or the hold must be watched
        return True

    async def _report(self, finished: Finished, done: bool) -> None:
        """Report a settlement's result; a False for one that may have taken effect in a call
        whose reply was lost is checked with the store first (it is lost only if it did not)."""
        if not done and finished.ambiguous and self._confirm is not None:
            try:
                done = await self._confirm(finished)
            except Exception:  # the store cannot say now: it stays lost
                log.debug("pgque worker: could not confirm a settlement", exc_info=True)
        self._reporter.settled(finished, done)

    async def _known(self, plan: _Plan, known: list[bool | None]) -> _Plan:
        """Report the settlements of *plan* whose result *known* gives; return the plan of the
        rest (the claim included)."""
        rest = _Plan()
        rest.wants = plan.wants
        rest.buffered = plan.buffered
        rest.holders = plan.holders
        for finished, done in zip(plan.finished, known, strict=True):
            if done is None:
                rest.finished.append(finished)
            else:
                self._reporter.settled(finished, done)
        return rest

    def _failed(self, plan: _Plan, error: BaseException) -> None:
        """A call failed: report it once, fail its waiting slots, keep what may be retried
        (after a lost connection or a conflict, until the lease ends)."""
        lease = plan.finished[0].lease if plan.finished else None
        self._reporter.failed(error, lease, _operation(plan))
        retryable = isinstance(error, (ConnectionLost, RetryableConflict))
        now = time.monotonic()
        again: list[Finished] = []
        for finished in plan.finished:
            if retryable and not self._abort.done() and now < finished.expires_at:
                again.append(finished)
            else:
                self._reporter.settled(finished, False)
        with self._lock:
            self._asked_for_buffer -= plan.buffered
            self._settlements[:0] = again
        for want in plan.wants:
            want.error = error
            resolve(want.done)

    def _partly(self, plan: _Plan, part: PartlyApplied) -> None:
        """Count what a call made of single calls did before it failed; fail the rest."""
        done = len(part.settled)
        for finished, ok in zip(plan.finished, part.settled, strict=False):
            self._reporter.settled(finished, ok)
        rest = _Plan()
        rest.finished = plan.finished[done:]
        rest.wants = plan.wants
        rest.buffered = plan.buffered
        rest.holders = plan.holders
        if part.leases:  # claimed before the failure: nobody will run them; give them back
            now = time.monotonic()
            with self._lock:
                for lease in part.leases:
                    self._settlements.append(_released(lease, now, now + self._options.visibility))
            self._reporter.claimed(part.leases)
        self._failed(rest, part.error)

    async def _each_alone(
        self, plan: _Plan, settlements: list[Settlement], error: BaseException
    ) -> None:
        """A call was refused for good (or, over shards, lost on one of them): report it, then
        make each of its settlements, and its claim, a call of its own, so that one bad part
        fails alone."""
        lease = plan.finished[0].lease if plan.finished else None
        self._reporter.failed(error, lease, _operation(plan))
        for finished, settlement in zip(plan.finished, settlements, strict=True):
            part = _Plan()
            part.finished = [finished]
            try:
                result = await self._call([settlement], [])
                done = bool(result.settled[0])
            except Exception as exc:
                self._failed(part, exc)
                continue
            await self._report(finished, done)
        with self._lock:
            self._asked_for_buffer -= plan.buffered
        if not plan.wants:
            return
        claim = _Plan()
        claim.wants = plan.wants
        claim.holders = [h for want in plan.wants for h in [want.holder] * want.count]
        await self._perform(claim)


class _Unused(Finished):
    """A buffered lease no slot took: given back unhandled (released)."""

    __slots__ = ()


def _released(lease: Lease, now: float, expires_at: float) -> Finished:
    """A buffered lease given back unhandled."""
    return _Unused(lease, Decision(Outcome.RELEASED), now, expires_at)


def _operation(plan: _Plan) -> str:
    """The name a failed call is reported with: what it settled, and whether it claimed."""
    claiming = " and claim" if plan.holders else ""
    if not plan.finished:
        return "claim"
    if len(plan.finished) > 1:
        return f"settle ({len(plan.finished)}){claiming}"
    outcome = plan.finished[0].decision.outcome
    return SETTLE_VERB[outcome] + claiming


def resolve(future: asyncio.Future[None]) -> None:
    """Mark *future* done (if it is not yet)."""
    if not future.done():
        future.set_result(None)


async def _first(future: asyncio.Future[None], other: asyncio.Future[None]) -> None:
    """Wait until *future* or *other* is done."""
    if not future.done():
        await asyncio.wait({future, other}, return_when=asyncio.FIRST_COMPLETED)


async def _wait(event: asyncio.Event, timeout: float | None) -> None:
    """Wait until *event* is set, or *timeout* seconds (None: no limit)."""
    with contextlib.suppress(asyncio.TimeoutError):  # async-only
        await asyncio.wait_for(event.wait(), timeout)  # async-only
    # sync: event.wait(timeout)


async def pause(until: asyncio.Future[None], seconds: float) -> None:
    """Sleep *seconds*, waking early when *until* is done."""
    if seconds > 0 and not until.done():
        await asyncio.wait({until}, timeout=seconds)
