"""Drain a backlog with N blocking workers and report messages per second.

    python benchmarks/drain.py URL [--workers N] [--groups G] [--per-group M] [--threads]

URL is any queue URL (``postgresql://...``, ``redis://...``, ``memory://``). The script
publishes G x M messages to a fresh queue (``bench_<random>``), then starts N workers, each
with its own transport, that claim and ack one message at a time until the queue is empty.
Workers are processes by default (``--threads`` for threads; ``memory://`` always uses threads,
as a memory store lives in one process). The clock runs from the moment every worker is
connected until the last one finishes, so start-up is not counted. Afterwards the queue is
purged when the transport offers ``purge()``.

With ``--pg-health`` on a PostgreSQL URL it also prints the live and dead row versions of
pgque's tables after the drain (what autovacuum left), waiting ``--settle`` seconds first so the
server's statistics are current.

Numbers drift between machines and runs; compare ratios measured in one run. One line of JSON
per run goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import threading
import time
import uuid
from typing import Any

from pgque.core import Event, connect
from pgque.core.urls import mask_url, parse_url

BATCH = 1000


def _worker(url: str, queue: str, ready: Any, start: Any, counts: Any, index: int) -> None:
    """Claim and ack until the queue stays empty; store how many messages this worker did."""
    done = empty = 0
    with connect(url, queue=queue) as transport:
        ready.wait()
        start.wait()
        while empty < 3:
            lease = transport.claim(visibility=60)
            if lease is None:
                empty += 1
                time.sleep(0.02)
                continue
            empty = 0
            transport.ack(lease)
            done += 1
    counts[index] = done


def _pg_health(url: str) -> list[dict[str, Any]]:
    import psycopg

    from pgque.postgres._options import split_url
    from pgque.postgres._sql import queries

    dsn, _ = split_url(url, {})
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(queries()["table_health"])
        names = [c.name for c in cursor.description or []]
        return [dict(zip(names, map(str, row), strict=True)) for row in cursor.fetchall()]


def main() -> None:
    """Parse arguments, publish the backlog, drain it and print the result as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="queue URL (postgresql://, redis://, memory://)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--per-group", type=int, default=25)
    parser.add_argument("--threads", action="store_true", help="workers are threads")
    parser.add_argument("--pg-health", action="store_true", help="print table health after")
    parser.add_argument("--settle", type=float, default=2.0)
    args = parser.parse_args()

    parsed = parse_url(args.url)
    scheme = parsed.scheme
    threads = args.threads or scheme == "memory"
    queue = f"bench_{uuid.uuid4().hex[:12]}"
    if scheme == "memory" and not parsed.netloc_and_path:
        args.url = f"memory://{queue}"  # a named store, shared by the worker threads
    total = args.groups * args.per_group
    with connect(args.url, queue=queue) as transport:
        items = [
            (f"g{g:05d}", Event(kind="bench", data={"n": n}))
            for n in range(args.per_group)
            for g in range(args.groups)
        ]
        for i in range(0, len(items), BATCH):
            transport.publish_many(items[i : i + BATCH])

        if threads:
            ready: Any = threading.Barrier(args.workers + 1)
            start: Any = threading.Event()
            counts: Any = [0] * args.workers
            workers: list[Any] = [
                threading.Thread(target=_worker, args=(args.url, queue, ready, start, counts, i))
                for i in range(args.workers)
            ]
        else:
            ctx = multiprocessing.get_context("spawn")
            ready = ctx.Barrier(args.workers + 1)
            start = ctx.Event()
            counts = ctx.Array("i", args.workers)
            workers = [
                ctx.Process(target=_worker, args=(args.url, queue, ready, start, counts, i))
                for i in range(args.workers)
            ]
        for worker in workers:
            worker.start()
        ready.wait()
        began = time.perf_counter()
        start.set()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - began
        left = transport.stats().messages
        purge = getattr(transport, "purge", None)
        result: dict[str, Any] = {
            "url": mask_url(args.url),
            "workers": args.workers,
            "kind": "threads" if threads else "processes",
            "messages": total,
            "drained": sum(counts[:]),
            "left": left,
            "seconds": round(elapsed, 3),
            "messages_per_s": round(total / elapsed, 1),
        }
        if args.pg_health and scheme in {"postgresql", "postgres"}:
            time.sleep(args.settle)
            result["tables"] = _pg_health(args.url)
        if callable(purge):
            purge()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
