"""Measure a groups() page on PostgreSQL at 1,000 and at 1,000,000 groups.

    python benchmarks/groups_page.py URL [--sizes 1000,1000000] [--rounds 15] [--calls 20]

URL is a PostgreSQL URL of a local server (127.0.0.1, ::1 or localhost; ``--any-host`` lifts
that). pgque's schema is installed there if missing. Each size gets a throwaway queue
(``bench_gp_<random>_<size>``) filled in SQL with ``generate_series``: one ready group per
row, one message each, then ``VACUUM ANALYZE`` of pgque's tables. Both queues are deleted at
the end, also after a failure or Ctrl-C. Every statement of the fill runs under a
``statement_timeout`` (``--fill-timeout``, default 600 s), so the run is bounded.

Each round times, for every size in a random order, the first page and a middle page (the
page after the middle group id) of ``groups(limit=100)``: ``calls`` calls each, both through
the transport (``PostgresTransport.groups``, what a caller sees: one round trip and 100
``GroupInfo`` models) and as the bare SQL function (``pgque_groups_v1``, rows fetched, no
models). The report is the median over rounds of the mean time per call, with the spread
(lowest and highest round), and the ratio of the largest size to the smallest. A page is a
range of the primary key, so the ratio should stay near 1. One line of JSON goes to stdout
after the table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import psycopg

from pgque.core import Event
from pgque.postgres import PostgresTransport, install_schema

Conn = psycopg.Connection[tuple[Any, ...]]

#: Hosts the benchmark writes a million rows to without --any-host.
LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost"}

FILL_GROUPS = """
INSERT INTO pgque_fifo.groups (queue, group_id, priority, until)
SELECT %(queue)s, 'g' || lpad(i::text, 7, '0'), 0, %(now)s - i
  FROM generate_series(1, %(n)s) AS i
"""
FILL_MESSAGES = """
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
SELECT %(queue)s, 'g' || lpad(i::text, 7, '0'), %(event)s, %(now)s
  FROM generate_series(1, %(n)s) AS i
"""
PAGE_SQL = "SELECT * FROM pgque_fifo.pgque_groups_v1(%s, NULL, 100, %s, NULL)"
DROP_MESSAGES = "DELETE FROM pgque_fifo.messages WHERE queue = %s"
DROP_GROUPS = "DELETE FROM pgque_fifo.groups WHERE queue = %s"


def _group_id(i: int) -> str:
    return "g" + str(i).zfill(7)


def _check_host(url: str, any_host: bool) -> None:
    host = urlsplit(url).hostname or "localhost"
    if not any_host and host not in LOCAL_HOSTS:
        raise SystemExit(f"refusing to fill {host!r} with a million rows; pass --any-host")


def _fill(conn: Conn, queue: str, n: int, timeout_s: float) -> float:
    """Fill *queue* with *n* ready groups of one message each; return the seconds it took."""
    start = time.perf_counter()
    row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    params = {"queue": queue, "n": n, "now": float(row[0]), "event": Event(kind="x").to_json()}
    conn.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(timeout_s)}s"])
    with conn.transaction():
        conn.execute(FILL_GROUPS, params)
        conn.execute(FILL_MESSAGES, params)
    return time.perf_counter() - start


def _page_call(
    via: str, conn: Conn, transport: PostgresTransport, queue: str, after: str | None
) -> Callable[[], int]:
    """Return a call that fetches one page (through the transport or the bare function)."""
    if via == "transport":
        return lambda: len(transport.groups(limit=100, after=after))
    return lambda: len(conn.execute(PAGE_SQL, (queue, after)).fetchall())


def _mean_call(call: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


def _summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(samples) * 1000,
        "low_ms": min(samples) * 1000,
        "high_ms": max(samples) * 1000,
    }


def run(url: str, sizes: list[int], rounds: int, calls: int, fill_timeout: float) -> dict[str, Any]:
    """Fill, measure and clean up; return the report."""
    tag = uuid.uuid4().hex[:10]
    queues = {n: f"bench_gp_{tag}_{n}" for n in sizes}
    report: dict[str, Any] = {"sizes": sizes, "rounds": rounds, "calls": calls, "fill_s": {}}
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn)
        transports: dict[int, PostgresTransport] = {}
        try:
            for n, queue in queues.items():
                report["fill_s"][n] = round(_fill(conn, queue, n, fill_timeout), 1)
                print(f"filled {n:,} groups in {report['fill_s'][n]} s", file=sys.stderr)
            conn.execute("SELECT set_config('statement_timeout', %s, false)", [f"{fill_timeout}s"])
            conn.execute("VACUUM ANALYZE pgque_fifo.groups")
            conn.execute("VACUUM ANALYZE pgque_fifo.messages")
            for n, queue in queues.items():
                transports[n] = PostgresTransport(url, queue=queue, setup=False, max_size=1)
            samples: dict[str, list[float]] = {}
            middles = {n: _group_id(n // 2) for n in sizes}
            for _round in range(rounds):
                order = [
                    (n, page, via)
                    for n in sizes
                    for page in ("first", "middle")
                    for via in ("transport", "sql")
                ]
                random.shuffle(order)
                for n, page, via in order:
                    after = None if page == "first" else middles[n]
                    call = _page_call(via, conn, transports[n], queues[n], after)
                    assert call() == 100, "a page of 100 groups was expected"
                    samples.setdefault(f"{via} {page} {n}", []).append(_mean_call(call, calls))
            report["results"] = {key: _summary(values) for key, values in samples.items()}
            small, large = min(sizes), max(sizes)
            report["ratios"] = {
                f"{via} {page}": statistics.median(samples[f"{via} {page} {large}"])
                / statistics.median(samples[f"{via} {page} {small}"])
                for via in ("transport", "sql")
                for page in ("first", "middle")
            }
        finally:
            for transport in transports.values():
                transport.close()
            for queue in queues.values():
                conn.execute(DROP_MESSAGES, [queue])
                conn.execute(DROP_GROUPS, [queue])
    return report


def _print(report: dict[str, Any]) -> None:
    sizes: list[int] = report["sizes"]
    print(f"groups(limit=100): median of {report['rounds']} rounds x {report['calls']} calls")
    print(f"{'via':10} {'page':7} " + " ".join(f"{n:>26,}" for n in sizes) + "   ratio")
    for via in ("transport", "sql"):
        for page in ("first", "middle"):
            cells = []
            for n in sizes:
                r = report["results"][f"{via} {page} {n}"]
                cells.append(
                    f"{r['median_ms']:8.3f} ms ({r['low_ms']:.3f}-{r['high_ms']:.3f})".rjust(26)
                )
            ratio = report["ratios"][f"{via} {page}"]
            print(f"{via:10} {page:7} " + " ".join(cells) + f"   {ratio:.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a PostgreSQL URL (a local server unless --any-host)")
    parser.add_argument("--sizes", default="1000,1000000", help="group counts, comma separated")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20, help="calls per measurement")
    parser.add_argument("--fill-timeout", type=float, default=600.0, help="seconds per statement")
    parser.add_argument("--any-host", action="store_true", help="allow a server that is not local")
    args = parser.parse_args(argv)
    _check_host(args.url, args.any_host)
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    if len(sizes) < 2 or sizes[0] < 200:
        raise SystemExit("--sizes needs two sizes of at least 200 groups")
    report = run(args.url, sizes, args.rounds, args.calls, args.fill_timeout)
    _print(report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
