"""The cost of ``stats()`` on a big queue (issue 33): the ``stats`` section.

:func:`stats_cost` fills a queue with *groups* groups of one message each (``publish_many`` in
lists of 1,000, as the tenants cost scenario does), leases *leased* of them, parks *parked* of
those and pauses *paused* groups, so that every count ``stats()`` gives is large; then times
*calls* ``stats()`` calls, one after another, and reports their median and spread.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from pgque.core import AsyncSupportsPurge, Event, Lease
from pgque_bench._common import fresh_queue, percentile
from pgque_bench._systems import System, open_async

__all__ = ["stats_cost"]

_CHUNK = 1_000
#: Leases and parks outlast the case: nothing moves between states while stats() is timed.
_HOUR = 3600.0


def stats_cost(
    system: System, groups: int, leased: int, parked: int, paused: int, calls: int
) -> dict[str, Any]:
    """Time *calls* ``stats()`` calls on a queue of *groups* groups (see the module)."""

    async def main() -> dict[str, Any]:
        transport = open_async(system, fresh_queue("stats"), connections=1)
        try:
            started = time.perf_counter()
            event = Event(kind="bench")
            for start in range(0, groups, _CHUNK):
                end = min(groups, start + _CHUNK)
                await transport.publish_many([(f"g{n}", event) for n in range(start, end)])
            leases: list[Lease] = []
            while len(leases) < leased:
                got = await transport.claim_many(min(_CHUNK, leased - len(leases)), _HOUR)
                if not got:
                    raise RuntimeError(f"only {len(leases)} groups could be leased")
                leases.extend(got)
            for lease in leases[:parked]:
                await transport.nack(lease, delay=_HOUR)
            for n in range(paused):
                await transport.pause(f"p{n}")
            fill_s = time.perf_counter() - started
            seen = await transport.stats()
            want = (groups + paused, leased - parked, parked, paused)
            got_counts = (seen.groups, seen.in_flight, seen.parked, seen.paused)
            if got_counts != want:
                raise RuntimeError(f"stats() counted {got_counts}, the queue holds {want}")
            times_ms: list[float] = []
            for _ in range(calls):
                t0 = time.perf_counter()
                await transport.stats()
                times_ms.append((time.perf_counter() - t0) * 1000)
            median = statistics.median(times_ms)
            return {
                "groups": groups,
                "leased": leased,
                "parked": parked,
                "paused": paused,
                "calls": calls,
                "fill_s": fill_s,
                "median_ms": median,
                "p90_ms": percentile(times_ms, 90),
                "min_ms": min(times_ms),
                "max_ms": max(times_ms),
                "rate": 1000.0 / median if median else None,
            }
        finally:
            try:
                if isinstance(transport, AsyncSupportsPurge):
                    await transport.purge()
            finally:
                await transport.close()

    return asyncio.run(main())
