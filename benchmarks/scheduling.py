"""Measure the two cost figures of scheduled messages on PostgreSQL (issue 17).

    python benchmarks/scheduling.py URL [--scheduled 1000000] [--rounds 7] [--claims 200]
                                        [--due 50] [--spacing 0.1]

URL is a PostgreSQL URL of a local server (127.0.0.1, ::1 or localhost; ``--any-host`` lifts
that); pgque's schema is installed there if missing. The SQL is in benchmarks/scheduling.sql.

(a) Claim latency with *scheduled* messages not yet due against none, side by side: two
throwaway queues, one filled with ``--scheduled`` scheduled rows (due a day or more ahead, one
``INSERT ... SELECT generate_series``, then ``VACUUM ANALYZE``). Each round publishes
``--claims`` messages into each queue (outside the clock), then times ``claim()`` + ``ack()``
of one message at a time, ``--claims`` times per queue; the two queues are measured in turn, in
an order that alternates between rounds. Reported: the median over rounds of each round's
median, the spread (lowest and highest round median) and the ratio full / empty.

(b) Due-to-claimable latency: an idle ``AsyncWorker`` (wake-ups on: the transport LISTENs and
caps its wait at the next due time) runs on a third queue; ``--due`` messages are published
with delays ``0.3 + i x spacing`` seconds, and the handler records when it starts. Reported:
median, p99 and max of (handler start - due time), the due time being the one the server
recorded (``scheduled()``, read right after each publish). Both sides read the same machine's
clock.

Everything the run wrote is purged at the end, also after a failure or Ctrl-C. One line of JSON
goes to stdout after the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from _scheduling_report import check_host, claim_round, print_report

from pgque.core import AsyncWorker, Event
from pgque.postgres import PostgresTransport, install_schema
from pgque.postgres.named_sql import parse_named_sql
from pgque.postgres_async import AsyncPostgresTransport

Conn = psycopg.Connection[tuple[Any, ...]]

#: Hosts the benchmark writes a million rows to without --any-host.

SQL = parse_named_sql((Path(__file__).parent / "scheduling.sql").read_text(encoding="utf-8"))


def _server_now(conn: Conn) -> float:
    row = conn.execute(SQL["server_now"]).fetchone()
    assert row is not None
    return float(row[0])


def _fill(conn: Conn, queue: str, n: int, timeout_s: float) -> float:
    """Schedule *n* messages into *queue*, none due for a day; return the seconds it took."""
    start = time.perf_counter()
    conn.execute(SQL["statement_timeout"], {"timeout": f"{int(timeout_s)}s"})
    params = {"queue": queue, "n": n, "now": _server_now(conn), "event": Event(kind="x").to_json()}
    with conn.transaction():
        conn.execute(SQL["fill_scheduled"], params)
    for name in ("vacuum_scheduled", "vacuum_messages", "vacuum_groups"):
        conn.execute(SQL[name])
    return time.perf_counter() - start


def _claims(url: str, queues: dict[str, str], rounds: int, claims: int) -> dict[str, Any]:
    transports = {
        k: PostgresTransport(url, queue=q, setup=False, max_size=1) for k, q in queues.items()
    }
    try:
        per_round: dict[str, list[float]] = {k: [] for k in queues}
        for transport in transports.values():
            claim_round(transport, 20)  # warm the connection and the plans
        for r in range(rounds):
            order = list(queues) if r % 2 == 0 else list(reversed(queues))
            for key in order:
                per_round[key].append(claim_round(transports[key], claims))
    finally:
        for transport in transports.values():
            transport.close()
    result: dict[str, Any] = {
        key: {
            "median_ms": statistics.median(values) * 1000,
            "low_ms": min(values) * 1000,
            "high_ms": max(values) * 1000,
        }
        for key, values in per_round.items()
    }
    result["ratio"] = statistics.median(per_round["full"]) / statistics.median(per_round["empty"])
    return result


async def _due_latency(url: str, queue: str, due: int, spacing: float) -> dict[str, Any]:
    started: dict[int, float] = {}
    done = asyncio.Event()

    async def handler(_event: Event, lease: Any) -> None:
        started[lease.message_id] = time.time()
        if len(started) >= due:
            done.set()

    transport = await AsyncPostgresTransport.from_dsn(url, queue=queue, setup=False)
    async with transport:
        worker = AsyncWorker(transport, handler, idle_backoff=(0.05, 2.0))
        running = asyncio.ensure_future(worker.run(install_signal_handlers=False))
        await asyncio.sleep(1.0)  # the worker is idle, listening
        due_at: dict[int, float] = {}
        for i in range(due):
            message_id = await transport.publish("g", Event(kind="d"), delay=0.3 + i * spacing)
            # The due time the server recorded (the message is due 0.3 s later at the soonest).
            (item,) = await transport.scheduled(limit=1, after=message_id - 1)
            assert item.id == message_id, "the message just scheduled was expected"
            due_at[message_id] = item.due_at
        await asyncio.wait_for(done.wait(), timeout=0.3 + due * spacing + 30)
        worker.stop()
        await running
    late = sorted((started[i] - due_at[i]) * 1000 for i in due_at)
    return {
        "n": len(late),
        "median_ms": statistics.median(late),
        "p99_ms": late[min(len(late) - 1, round(0.99 * (len(late) - 1)))],
        "max_ms": late[-1],
        "min_ms": late[0],
    }


def run(
    url: str, scheduled: int, rounds: int, claims: int, due: int, spacing: float, timeout: float
) -> dict[str, Any]:
    """Fill, measure and clean up; return the report."""
    tag = uuid.uuid4().hex[:10]
    queues = {"empty": f"bench_sched_{tag}_empty", "full": f"bench_sched_{tag}_full"}
    due_queue = f"bench_sched_{tag}_due"
    report: dict[str, Any] = {"scheduled": scheduled, "rounds": rounds, "claims": claims}
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn)
        try:
            report["fill_s"] = round(_fill(conn, queues["full"], scheduled, timeout), 1)
            print(f"scheduled {scheduled:,} messages in {report['fill_s']} s", file=sys.stderr)
            report["claim"] = _claims(url, queues, rounds, claims)
            report["due"] = asyncio.run(_due_latency(url, due_queue, due, spacing))
        finally:
            for queue in (*queues.values(), due_queue):
                PostgresTransport(conn, queue=queue, setup=False).purge()
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a PostgreSQL URL (a local server unless --any-host)")
    parser.add_argument("--scheduled", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--claims", type=int, default=200, help="claims per queue and round")
    parser.add_argument("--due", type=int, default=50, help="delayed messages for (b)")
    parser.add_argument("--spacing", type=float, default=0.1, help="seconds between due times")
    parser.add_argument("--fill-timeout", type=float, default=600.0, help="seconds per statement")
    parser.add_argument("--any-host", action="store_true", help="allow a server that is not local")
    args = parser.parse_args(argv)
    check_host(args.url, args.any_host)
    report = run(
        args.url,
        args.scheduled,
        args.rounds,
        args.claims,
        args.due,
        args.spacing,
        args.fill_timeout,
    )
    print_report(report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
