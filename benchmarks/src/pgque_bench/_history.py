"""Job history's pruning against claims (issue 33): does dropping a day of history slow the
claims that run while it happens?

:func:`prune` fills *days* past day partitions of ``pgque_fifo.history`` with *rows* records
each (inserted by SQL, as a day of settlements would leave them), then drains a backlog with
``claim_many(32)`` + ``ack_many`` (history on, so every ack writes a record) while a second
connection prunes those days one at a time through the maintenance function, pausing between
prunes. Each claim batch is timed; a batch whose interval overlaps a prune counts as *during*,
the others as *outside*. The result is the claims per second of each and their ratio: how much
a prune slows the claims that run beside it (1.0: not at all).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg

from pgque.core import AsyncSupportsHistory, AsyncTransport, Event
from pgque_bench._common import fresh_queue, group_of
from pgque_bench._systems import _CHUNK, System, _cleanup, open_async

__all__ = ["prune"]

_DAY = 86_400
_BATCH = 32
_VISIBILITY = 60.0

_FILL = """
INSERT INTO pgque_fifo.history
    (queue, message_id, group_id, kind, outcome, attempt, published_at, started_at,
     finished_at, worker)
SELECT %(queue)s, n, 'g' || (n %% 1000), 'bench', 'acked', 1, t, t, t + 0.001, 'bench:1'
  FROM generate_series(1, %(rows)s) AS n,
       LATERAL (SELECT %(day)s * 86400.0 + n * (86000.0 / %(rows)s) AS t) AS at
"""
_MAINTAIN = "SELECT pgque_fifo.pgque_history_maintain_v1(%(now)s)"
_DAY_LEFT = (
    "SELECT EXISTS (SELECT 1 FROM pgque_fifo.history"
    " WHERE finished_at >= %(lo)s AND finished_at < %(hi)s)"
)


async def _fill_days(url: str, queue: str, first: int, days: int, rows: int) -> None:
    """Create the day partitions first .. first + days - 1 (maintenance at a past clock
    creates that day and the two after it) and fill each with *rows* records of *queue*."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for day in range(first, first + days, 3):
            await conn.execute(_MAINTAIN, {"now": day * _DAY + 1.0})
        for day in range(first, first + days):
            await conn.execute(_FILL, {"queue": queue, "rows": rows, "day": day})
        await conn.execute("ANALYZE pgque_fifo.history")


async def _prune_days(
    url: str, first: int, days: int, pause: float, stop: asyncio.Event
) -> list[tuple[float, float]]:
    """Prune the filled days one by one (maintenance at the clock where exactly the oldest is
    past a one-day retention), pausing *pause* s between; return each prune's interval."""
    spans: list[tuple[float, float]] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for day in range(first, first + days):
            await asyncio.sleep(pause)
            if stop.is_set():
                break
            started = time.perf_counter()
            await conn.execute(_MAINTAIN, {"now": (day + 2) * _DAY + 1.0})
            spans.append((started, time.perf_counter()))
            cur = await conn.execute(_DAY_LEFT, {"lo": day * _DAY, "hi": (day + 1) * _DAY})
            row = await cur.fetchone()
            if row is None or row[0]:
                raise RuntimeError(f"history day {day} was not pruned by maintenance")
    return spans


async def _claims(transport: AsyncTransport, stop: asyncio.Event) -> list[tuple[float, float, int]]:
    """claim_many + ack_many until *stop* (the prunes are over) or the queue is empty; each
    batch's interval and claims."""
    batches: list[tuple[float, float, int]] = []
    while not stop.is_set():
        started = time.perf_counter()
        leases = await transport.claim_many(_BATCH, visibility=_VISIBILITY)
        if not leases:
            break
        await transport.ack_many(leases)
        batches.append((started, time.perf_counter(), len(leases)))
    return batches


def _split(
    batches: list[tuple[float, float, int]], spans: list[tuple[float, float]]
) -> dict[str, float]:
    """Claims per second of the batches that overlap a prune (*during*) and of the others
    (*outside*), and how many batches overlapped one."""
    claims = {"during": 0, "outside": 0}
    seconds = {"during": 0.0, "outside": 0.0}
    for start, end, done in batches:
        name = "during" if any(start < stop and begin < end for begin, stop in spans) else "outside"
        claims[name] += done
        seconds[name] += end - start
    rates = {name: claims[name] / seconds[name] if seconds[name] else 0.0 for name in claims}
    overlapping = sum(1 for start, end, _ in batches if any(
        start < stop and begin < end for begin, stop in spans))  # fmt: skip
    return {**rates, "during_batches": float(overlapping)}


def prune(system: System, days: int, rows: int, messages: int, pause: float) -> dict[str, Any]:
    """The scenario of the module docstring: *days* past days of *rows* records each, pruned one
    at a time every *pause* s while a backlog of *messages* (500 groups) drains."""
    if not (system.is_postgres and system.is_async):
        raise ValueError("the history prune scenario runs on the asyncio PostgreSQL transport")
    queue = fresh_queue("history")
    first = int(time.time() // _DAY) - 30 - days  # whole days well past any retention

    async def run() -> dict[str, Any]:
        transport = open_async(system, queue, 2, history="1d")
        try:
            if not isinstance(transport, AsyncSupportsHistory):
                raise TypeError("the history prune scenario needs a transport with history")
            await transport.set_history("1d")  # stored now: the days are made for this queue
            event = Event(kind="bench", data={})
            items = [(group_of(i, 500), event) for i in range(messages)]
            for start in range(0, messages, _CHUNK):
                await transport.publish_many(items[start : start + _CHUNK])
            await _fill_days(system.url, queue, first, days, rows)
            stop = asyncio.Event()
            pruner = asyncio.create_task(_prune_days(system.url, first, days, pause, stop))
            pruner.add_done_callback(lambda _: stop.set())  # the claims stop with the prunes
            batches = await _claims(transport, stop)
            stop.set()
            spans = await pruner
        finally:
            await transport.close()
        if len(spans) < days:
            raise RuntimeError(
                f"the backlog drained after {len(spans)} of {days} prunes: raise messages"
            )
        rates = _split(batches, spans)
        return {
            "days": days,
            "rows_per_day": rows,
            "prune_ms": sorted(round((end - start) * 1000, 1) for start, end in spans),
            "during_per_s": rates["during"],
            "outside_per_s": rates["outside"],
            "during_batches": int(rates["during_batches"]),
            "ratio": rates["during"] / rates["outside"] if rates["outside"] else 0.0,
        }

    try:
        return asyncio.run(run())
    finally:
        _cleanup(system, queue)
