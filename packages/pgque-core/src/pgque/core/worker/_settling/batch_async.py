"""The settlements of one worker run on their way to the server, and what became of them.

Slots put each finished lease here (:meth:`AsyncSettlementBatch.put`, which never waits); the
claim batcher takes whatever waits into its next round trip (:meth:`~AsyncSettlementBatch.take`),
so settlements ride on the claims of the slots that wait, and gives back each one's result
(:meth:`~AsyncSettlementBatch.results`, :meth:`~AsyncSettlementBatch.failed`). A result is
counted in the run's report once: a settlement that took effect by its outcome, one whose
lease was gone as ``lost``. A settlement whose call failed on a lost connection or a conflict
waits for the next round trip, until its lease ends; one whose reply was lost and that was
answered False when sent again is checked with the store before it is called lost.

The asyncio source of its blocking twin, batch_sync.py.  # async-only
"""

from __future__ import annotations

import asyncio  # async-only

# sync: import concurrent.futures
import threading
import time
from collections.abc import Callable, Sequence

from pgque.core.contract import AsyncTransport
from pgque.core.transport_options import OnExhausted
from pgque.core.worker._logs import lease_fields, log
from pgque.core.worker._report import RunReport
from pgque.core.worker._settling.decisions import (
    SETTLE_VERB,
    Finished,
    answered_outcome,
    is_timed_out,
    split_failed,
    split_known,
    took_effect,
)

__all__ = ["AsyncSettlementBatch"]


class AsyncSettlementBatch:
    """The finished leases of one run waiting to be settled (see the module docstring).

    *transport* is asked, through its ``group`` read, whether an ambiguous settlement took
    effect; *on_exhausted* is its policy (how a failure on the last attempt is counted);
    *abort* is the run's: once it is done, a failed settlement is given up, not retried.
    """

    def __init__(
        self,
        transport: AsyncTransport,
        report: RunReport,
        on_exhausted: OnExhausted,
        *,
        abort: asyncio.Future[None],
    ) -> None:
        self._transport = transport
        self._report = report
        self._on_exhausted = on_exhausted
        self._abort = abort
        self._lock = threading.Lock()
        self._waiting: list[Finished] = []
        #: called when a slot puts a settlement (the claim batcher's loops wake up)
        self._wake: Callable[[], None] = _nothing

    def __len__(self) -> int:
        """Return how many settlements wait for a round trip."""
        return len(self._waiting)

    # ------------------------------------------------------------------ in

    def on_put(self, wake: Callable[[], None]) -> None:
        """Call *wake* each time a slot puts a settlement."""
        self._wake = wake

    def put(self, finished: Finished) -> None:
        """Queue *finished* for the next round trip; returns at once (its result is counted)."""
        with self._lock:
            self._waiting.append(finished)
        self._wake()

    def add(self, finished: list[Finished]) -> None:
        """Queue *finished* (leases the claim batcher gives back) without waking anyone."""
        with self._lock:
            self._waiting += finished

    # ------------------------------------------------------------------ out

    def take(self, limit: int) -> list[Finished]:
        """Return up to *limit* waiting settlements, oldest first, for a round trip."""
        with self._lock:
            taken = self._waiting[:limit]
            del self._waiting[:limit]
        return taken

    # ------------------------------------------------------------------ results

    def answered(self, finished: Finished, done: bool) -> None:
        """Count the result of *finished*: it took effect (*done*) or found its lease gone."""
        decision = finished.decision
        if not done:
            log.warning(
                "worker %s: could not %s message %s: lease no longer held",
                self._report.name,
                SETTLE_VERB[decision.outcome],
                finished.lease.message_id,
                extra=lease_fields(finished.lease),
            )
        outcome = answered_outcome(decision, done, self._on_exhausted)
        self._report.finished(outcome, finished.started, finished.lease, is_timed_out(decision))

    async def results(self, finished: list[Finished], settled: Sequence[bool]) -> None:
        """Count what a round trip answered for each of *finished*; a False for one whose
        earlier call may have taken effect (its reply was lost) is checked with the store first
        (it is lost only if it did not)."""
        for item, done in zip(finished, settled, strict=True):
            if not done and item.ambiguous:  # rare: a settlement sent again after a lost reply
                try:
                    done = await self._took_effect(item)
                except Exception:  # the store cannot say now: it stays lost
                    log.debug("pgque worker: could not confirm a settlement", exc_info=True)
            self.answered(item, done)

    def known(self, finished: list[Finished], known: Sequence[bool | None]) -> list[Finished]:
        """Count the settlements of *finished* whose result *known* gives; return the rest."""
        answered, rest = split_known(finished, known)
        for item, done in answered:
            self.answered(item, done)
        return rest

    def failed(self, finished: list[Finished], error: BaseException) -> None:
        """The round trip carrying *finished* failed with *error*: after a lost connection or
        a conflict each waits for the next one until its lease ends (while the run is not
        aborted); any other is counted lost (:func:`~.decisions.split_failed` splits them)."""
        again, lost = split_failed(finished, error, self._abort.done(), time.monotonic())
        for item in lost:
            self.answered(item, False)
        with self._lock:
            self._waiting[:0] = again

    async def _took_effect(self, finished: Finished) -> bool:
        """Whether a settlement whose reply was lost, and which was answered False when sent
        again, took effect the first time: the store is asked for the lease's group
        (:func:`~pgque.core.worker._settling.decisions.took_effect` judges)."""
        lease = finished.lease
        info = await self._transport.group(lease.group_id)
        took = took_effect(finished, info)
        log.info(
            "worker %s: the %s of message %s, sent before a lost reply, %s",
            self._report.name,
            SETTLE_VERB[finished.decision.outcome],
            lease.message_id,
            "had taken effect" if took else "had not taken effect: its lease is lost",
            extra=lease_fields(lease),
        )
        return took


def _nothing() -> None:
    pass
