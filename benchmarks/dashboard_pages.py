"""Time the dashboard's pages over a PostgreSQL queue of 1,000,000 groups.

    python benchmarks/dashboard_pages.py URL [--groups 1000000] [--rounds 15] [--calls 5]
        [--backlog 0]

Needs pgque-dashboard, pgque-postgres, pgque-postgres-async, psycopg and httpx2 (the client).
URL is a PostgreSQL URL of a local server (127.0.0.1, ::1 or localhost; ``--any-host`` lifts
that) whose user may create databases. The run creates a throwaway database
(``pgque_bench_dash_<random>``), installs pgque's schema, fills one queue in SQL with
``generate_series`` (one message per group; every 1,000th group blocked, every 997th paused,
200 dead letters; older heads for higher ids; with ``--backlog N`` a stuck group holding N
messages older than every other head), ``VACUUM ANALYZE``s it, serves the dashboard
(``create_app(URL)``) with uvicorn on a free port of 127.0.0.1 and asks for each page over
HTTP with httpx, as a browser would. The database is dropped at the end, also after a failure
or Ctrl-C.

Each round asks, in a random order, for every page ``calls`` times; the report is, per
page, the median over rounds of the mean answer time (and the lowest and highest round).
It also times ``stats()`` itself (what the dashboard's refresher pays per queue and read,
no page waits for it): the median of ``calls`` calls through the asyncio transport.
One line of JSON goes to stdout after the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2 as httpx
import psycopg
import uvicorn
from psycopg import sql

from pgque.core import Event, connect_async
from pgque.dashboard import create_app
from pgque.postgres import install_schema
from pgque.postgres.named_sql import parse_named_sql

LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost"}
QUEUE = "bench"
SQL = parse_named_sql(Path(__file__).with_name("dashboard_pages.sql").read_text("utf-8"))


def _pages(n: int) -> dict[str, str]:
    """The pages timed: name -> path."""
    deep = "g" + str(n * 9 // 10).zfill(7)
    middle = "g" + str(n // 2 + 1).zfill(7)
    return {
        "queues page": "/",
        "groups, first page": f"/queues/{QUEUE}/groups",
        f"groups, deep keyset page (after {deep})": f"/queues/{QUEUE}/groups?after={deep}",
        "groups, blocked only": f"/queues/{QUEUE}/groups?state=blocked",
        "groups, id prefix g05": f"/queues/{QUEUE}/groups?prefix=g05",
        "groups, oldest heads of the queue": f"/queues/{QUEUE}/groups?sort=age",
        "groups, oldest heads, blocked only": f"/queues/{QUEUE}/groups?sort=age&state=blocked",
        f"one group ({middle})": f"/queues/{QUEUE}/groups/{middle}",
        "dead letters": f"/queues/{QUEUE}/dead-letters",
        "live counts fragment": f"/queues/{QUEUE}/summary",
        "API: groups, first page": f"/api/queues/{QUEUE}/groups",
        "API: 10 oldest heads": f"/api/queues/{QUEUE}/groups?sort=age&limit=10",
    }


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _fill(url: str, n: int, backlog: int) -> float:
    start = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn)
        row = conn.execute(SQL["server_now"]).fetchone()
        assert row is not None
        event = Event(kind="x").to_json()
        params = {"queue": QUEUE, "n": n, "now": float(row[0]), "event": event, "backlog": backlog}
        with conn.transaction():
            conn.execute(SQL["fill_groups"], params)
            conn.execute(SQL["fill_messages"], params)
            conn.execute(SQL["fill_backlog_group"], params)
            conn.execute(SQL["fill_backlog_messages"], params)
            conn.execute(SQL["fill_dead_letters"], params)
        for table in ("groups", "messages", "dead_letters"):
            conn.execute(SQL[f"analyze_{table}"])
    return time.perf_counter() - start


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _mean_call(client: httpx.Client, path: str, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:200])
    return (time.perf_counter() - start) / calls


async def _stats_s(url: str, calls: int) -> list[float]:
    """Seconds per ``stats()`` call on the filled queue, *calls* of them."""
    times = []
    async with connect_async(url, queue=QUEUE, setup=False) as transport:
        await transport.stats()
        for _ in range(calls):
            start = time.perf_counter()
            await transport.stats()
            times.append(time.perf_counter() - start)
    return times


def run(url: str, n: int, rounds: int, calls: int, backlog: int = 0) -> dict[str, Any]:
    """Create the database, fill it, serve the dashboard, time its pages, drop the database."""
    name = f"pgque_bench_dash_{uuid.uuid4().hex[:10]}"
    report: dict[str, Any] = {"groups": n, "rounds": rounds, "calls": calls, "backlog": backlog}
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        target = _with_database(url, name)
        report["fill_s"] = round(_fill(target, n, backlog), 1)
        print(f"filled {n:,} groups in {report['fill_s']} s", file=sys.stderr)
        stats_times = asyncio.run(_stats_s(target, calls))
        report["stats_ms"] = {
            "median_ms": statistics.median(stats_times) * 1000,
            "low_ms": min(stats_times) * 1000,
            "high_ms": max(stats_times) * 1000,
        }
        app = create_app(target)
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            if not thread.is_alive():
                raise SystemExit("the dashboard's server did not start")
            time.sleep(0.02)
        try:
            pages = _pages(n)
            samples: dict[str, list[float]] = {page: [] for page in pages}
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                for path in pages.values():  # warm up: pools, prepared statements, caches
                    _mean_call(client, path, 2)
                for _round in range(rounds):
                    order = list(pages.items())
                    random.shuffle(order)
                    for page, path in order:
                        samples[page].append(_mean_call(client, path, calls))
        finally:
            server.should_exit = True
            thread.join(30)
        report["load_average"] = [round(x, 2) for x in os.getloadavg()]
        report["results"] = {
            page: {
                "path": pages[page],
                "median_ms": statistics.median(values) * 1000,
                "low_ms": min(values) * 1000,
                "high_ms": max(values) * 1000,
            }
            for page, values in samples.items()
        }
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    return report


def _print(report: dict[str, Any]) -> None:
    print(
        f"dashboard pages at {report['groups']:,} groups (backlog of a stuck group: "
        f"{report['backlog']:,}): median of {report['rounds']} rounds x {report['calls']} requests"
    )
    for page, r in report["results"].items():
        print(f"{page:48} {r['median_ms']:8.1f} ms ({r['low_ms']:.1f}-{r['high_ms']:.1f})")
    r = report["stats_ms"]
    print(f"{'stats() alone (the refresher, per read)':48} {r['median_ms']:8.1f} ms ", end="")
    print(f"({r['low_ms']:.1f}-{r['high_ms']:.1f})")
    print(f"load average at the end: {report['load_average']}")


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run the benchmark, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("url", help="a PostgreSQL URL (a local server unless --any-host)")
    parser.add_argument("--groups", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=5, help="requests per page and round")
    parser.add_argument("--any-host", action="store_true", help="allow a server that is not local")
    parser.add_argument(
        "--backlog", type=int, default=0, help="messages of a stuck group older than every head"
    )
    args = parser.parse_args(argv)
    host = urlsplit(args.url).hostname or "localhost"
    if not args.any_host and host not in LOCAL_HOSTS:
        raise SystemExit(f"refusing to fill {host!r} with a million rows; pass --any-host")
    if args.groups < 1000:
        raise SystemExit("--groups must be at least 1000")
    report = run(args.url, args.groups, args.rounds, args.calls, args.backlog)
    _print(report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
