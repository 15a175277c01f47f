"""Where one message's time goes through ``AsyncWorker(concurrency=8)`` on PostgreSQL.

Usage: ``python benchmarks/worker_profile.py 'postgresql://HOST/DB?queue=NAME' [MESSAGES]``

Fills the queue with MESSAGES no-op messages over 500 groups (default 5,000), vacuums the
database, drains it once without the profiler (the wall time per message) and once under
cProfile, and prints cProfile's own time per message by where the code lives (the driver,
asyncio, the worker, the transport, ...). The profiler inflates every part: compare runs of
two versions side by side, not the absolute figures. It purges the queue it is given.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg

from pgque.core import AsyncWorker, Event, connect, connect_async

#: (substring of the file name, part): the first that matches names a function's part.
PARTS: list[tuple[str, str]] = [
    ("/psycopg_pool/", "psycopg pool (checkouts)"),
    ("/psycopg/", "psycopg (driver)"),
    ("postgres_async", "pgque PostgreSQL transport"),
    ("/pgque/postgres/", "pgque PostgreSQL transport"),
    ("/worker/", "pgque worker"),
    ("pgque/core", "pgque core (models, validation)"),
    ("pydantic", "pydantic"),
    ("/asyncio/", "asyncio"),
    ("selectors", "asyncio"),
]


def part_of(filename: str, function: str) -> str:
    """Return the part a profiled function belongs to."""
    if filename == "~" and ("poll" in function or "select" in function):
        return "waiting on the server (epoll)"
    if "pydantic_core" in function:
        return "pydantic"
    for needle, part in PARTS:
        if needle in filename:
            return part
    return "other (builtins, stdlib)"


def fill(url: str, messages: int) -> None:
    """Purge the queue, publish *messages* over 500 groups, vacuum the database."""
    with connect(url) as transport:
        transport.purge()  # type: ignore[attr-defined]
        items = [(f"g{i % 500}", Event(kind="k")) for i in range(messages)]
        for first in range(0, messages, 1000):
            transport.publish_many(items[first : first + 1000])
    parts = urlsplit(url)
    with psycopg.connect(urlunsplit(parts._replace(query="")), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


async def drain(url: str, messages: int) -> float:
    """Drain the queue with AsyncWorker(concurrency=8); return the seconds it took."""
    transport = connect_async(url)

    async def handler(event: Event) -> None:
        pass

    worker = AsyncWorker(transport, handler, concurrency=8)
    started = time.perf_counter()
    report = await worker.run(stop_when_idle=True, install_signal_handlers=False)
    seconds = time.perf_counter() - started
    await transport.close()
    if report.acked != messages:
        raise SystemExit(f"drained {report.acked} of {messages} messages")
    return seconds


def main() -> None:
    """Run the measurement given on the command line."""
    url = sys.argv[1]
    messages = int(sys.argv[2]) if len(sys.argv) > 2 else 5_000
    fill(url, messages)
    wall = asyncio.run(drain(url, messages))
    fill(url, messages)
    profile = cProfile.Profile()
    profile.enable()
    asyncio.run(drain(url, messages))
    profile.disable()
    totals: dict[str, float] = {}
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    for (filename, _line, function), (_cc, _nc, own, _cum, _callers) in stats.items():
        part = part_of(filename, function)
        totals[part] = totals.get(part, 0.0) + own
    print(f"wall without profiler: {wall * 1e6 / messages:.0f} us/msg ({messages / wall:.0f}/s)")
    for part, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {part:34s} {seconds * 1e6 / messages:7.1f} us/msg")
    print(f"  {'total (profiled)':34s} {sum(totals.values()) * 1e6 / messages:7.1f} us/msg")


if __name__ == "__main__":
    main()
