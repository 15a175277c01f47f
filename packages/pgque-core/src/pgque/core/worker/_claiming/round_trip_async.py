"""One round trip to the server: settle what waits and claim leases for the holders named,
in one ``settle_and_claim`` call, or in the contract's single calls on a transport without it.

The asyncio source of its blocking twin, round_trip_sync.py.  # async-only
"""

from __future__ import annotations

import time

from pgque.core.contract import AsyncTransport
from pgque.core.models import Lease, Settlement, SettleResult
from pgque.core.worker._claiming.planning import PartlyApplied, holder_runs
from pgque.core.worker._options import WorkerOptions
from pgque.core.worker._reachability import Reachability

__all__ = ["AsyncRoundTrip"]


class AsyncRoundTrip:
    """Make one call that settles *settlements* and claims a lease per holder label.

    A call that got an answer is told to *reach* (the end of an outage is logged). Raises what
    the transport raised, or :class:`~.planning.PartlyApplied` when single calls failed part
    of the way.
    """

    def __init__(
        self, transport: AsyncTransport, options: WorkerOptions, reach: Reachability
    ) -> None:
        self._transport = transport
        self._options = options
        self._reach = reach
        #: the transport settles and claims in one call (else the single calls are made)
        self.fused = callable(getattr(transport, "settle_and_claim", None))

    async def __call__(self, settlements: list[Settlement], holders: list[str]) -> SettleResult:
        """Settle *settlements* and claim one lease per label in *holders*; return both."""
        opts = self._options
        transport = self._transport
        sent = time.monotonic()
        if self.fused:
            result = await transport.settle_and_claim(
                settlements,
                len(holders),
                opts.visibility,
                min_priority=opts.min_priority,
                holder=holders,
            )
            self._reach.reached(sent)
            return result
        settled: list[bool] = []
        for item in settlements:
            try:
                settled.append(await self._apply(item))
            except Exception as exc:
                if not settled:
                    raise
                raise PartlyApplied(settled, exc) from exc  # the ones before it stand
        leases: list[Lease] = []
        try:
            for label, count in holder_runs(holders):  # one claim per run of equal labels
                if count == 1:
                    lease = await transport.claim(
                        opts.visibility, min_priority=opts.min_priority, holder=label
                    )
                    got = [] if lease is None else [lease]
                else:
                    got = await transport.claim_many(
                        count, opts.visibility, min_priority=opts.min_priority, holder=label
                    )
                leases += got
                if len(got) < count:
                    break  # nothing more is claimable
        except Exception as exc:
            if not settled and not leases:
                raise
            raise PartlyApplied(settled, exc, leases) from exc
        self._reach.reached(sent)
        return SettleResult(settled, leases)

    async def _apply(self, item: Settlement) -> bool:
        transport = self._transport
        if item.outcome == "ack":
            return await transport.ack(item.lease)
        if item.outcome == "release":
            return await transport.release(item.lease)
        if item.outcome == "dead_letter":
            return await transport.dead_letter(item.lease, item.reason, error=item.error)
        return await transport.nack(item.lease, delay=item.delay, error=item.error)
