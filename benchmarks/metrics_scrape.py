"""Measure a scrape of pgque's queue metrics on PostgreSQL (or Redis) at 1,000,000 groups.

    python benchmarks/metrics_scrape.py URL [--groups 1000000] [--rounds 7]

URL is a PostgreSQL URL of a local server (127.0.0.1, ::1 or localhost; ``--any-host`` lifts
that). pgque's schema is installed there if missing. A throwaway queue
(``bench_ms_<random>``) is filled in SQL with ``generate_series``: *groups* groups of one
message each, the heads enqueued one millisecond apart, of which 100 are blocked, 100 paused,
100 parked and 100 leased; then ``VACUUM ANALYZE`` of pgque's tables. The queue is deleted at
the end, also after a failure or Ctrl-C. Every statement of the fill runs under a
``statement_timeout`` (``--fill-timeout``, default 600 s).

Each round times, in a random order: one ``stats()`` call alone, and one whole scrape
(``prometheus_client.generate_latest`` of a registry holding a
:class:`~pgque.dashboard.metrics.QueueMetricsCollector` on that queue) at every ``--top-ks`` value
(default 0, 10, 100: how many oldest heads to export; 0 reads no group), and one
``oldest_groups(limit=10)`` call alone. With a ``redis://`` URL the queue is filled through the
public API instead (``publish_many`` in batches of 1,000, then ``claim_many`` and ``nack`` /
``pause`` for the same held groups) and purged at the end. The report is the median over
rounds with the lowest and highest round, and the number of head series each scrape exported.
One line of JSON goes to stdout after the table.
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
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pgque.core import Event, Transport, connect
from pgque.dashboard.metrics import QueueMetricsCollector
from pgque.postgres import install_schema

Conn = psycopg.Connection[tuple[Any, ...]]

#: Hosts the benchmark writes a million rows to without --any-host.
LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost"}
#: Groups of each held state (the first ids: blocked, then paused, parked, leased).
HELD = 100

# Group i: blocked for i <= 100, paused for 101-200, parked for 201-300 (until an hour from
# now), leased for 301-400 (a lease of an hour); the others ready. Head i was enqueued i ms
# before the oldest of the ready ones, so the held groups hold the oldest heads.
FILL_GROUPS = """
INSERT INTO pgque_fifo.groups (queue, group_id, priority, until, blocked, paused, token, leased_id)
SELECT %(queue)s, 'g' || lpad(i::text, 7, '0'), 0,
       CASE WHEN i > %(held)s * 2 AND i <= %(held)s * 4 THEN %(now)s + 3600 ELSE %(now)s - 1 END,
       i <= %(held)s,
       i > %(held)s AND i <= %(held)s * 2,
       CASE WHEN i > %(held)s * 3 AND i <= %(held)s * 4 THEN 'bench-' || i END,
       NULL
  FROM generate_series(1, %(n)s) AS i
"""
FILL_MESSAGES = """
INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at)
SELECT %(queue)s, 'g' || lpad(i::text, 7, '0'), %(event)s, %(now)s - 2000 - i * 0.001
  FROM generate_series(1, %(n)s) AS i
"""
DROP_MESSAGES = "DELETE FROM pgque_fifo.messages WHERE queue = %s"
DROP_GROUPS = "DELETE FROM pgque_fifo.groups WHERE queue = %s"


def _check_host(url: str, any_host: bool) -> None:
    host = urlsplit(url).hostname or "localhost"
    if not any_host and host not in LOCAL_HOSTS:
        raise SystemExit(f"refusing to fill {host!r} with a million rows; pass --any-host")


def _fill(conn: Conn, queue: str, n: int, timeout_s: float) -> float:
    """Fill *queue* with *n* groups of one message each; return the seconds it took."""
    start = time.perf_counter()
    row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    params = {
        "queue": queue,
        "n": n,
        "held": HELD,
        "now": float(row[0]),
        "event": Event(kind="x").to_json(),
    }
    conn.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(timeout_s)}s"])
    with conn.transaction():
        conn.execute(FILL_GROUPS, params)
        conn.execute(FILL_MESSAGES, params)
    return time.perf_counter() - start


def _scrape(registry: CollectorRegistry) -> dict[str, float]:
    """Scrape *registry* once; return the queue's figures (and head series) it exposed."""
    text = generate_latest(registry).decode()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in {"pgque_up", "pgque_groups"}:
                values[sample.name] = sample.value
            elif sample.name == "pgque_group_head_age_seconds":
                values["heads"] = values.get("heads", 0.0) + 1
    assert values.get("pgque_up") == 1.0, "the scrape failed"
    return values


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(samples) * 1000,
        "low_ms": min(samples) * 1000,
        "high_ms": max(samples) * 1000,
    }


def _measure(transport: Transport, groups: int, rounds: int, top_ks: list[int]) -> dict[str, Any]:
    """Time stats(), oldest_groups() and the scrapes on a filled queue; return the results and
    the head series each scrape exported."""
    cases: dict[str, Callable[[], object]] = {
        "stats()": transport.stats,
        "oldest_groups(limit=10)": lambda: transport.oldest_groups(limit=10),
    }
    scanned: dict[str, float] = {}
    for top_k in top_ks:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(QueueMetricsCollector(transport, top_k=top_k))
        name = f"scrape top_k={top_k}"
        first = _scrape(registry)
        assert first["pgque_groups"] == groups, first
        scanned[name] = first.get("heads", 0.0)
        cases[name] = lambda r=registry: _scrape(r)  # type: ignore[misc]
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _round in range(rounds):
        order = list(cases)
        random.shuffle(order)
        for name in order:
            samples[name].append(_timed(cases[name]))
    return {
        "results": {name: _summary(values) for name, values in samples.items()},
        "scanned": scanned,
    }


def run(
    url: str, groups: int, rounds: int, top_ks: list[int], fill_timeout: float
) -> dict[str, Any]:
    """Fill, measure and clean up on PostgreSQL; return the report."""
    queue = f"bench_ms_{uuid.uuid4().hex[:10]}"
    report: dict[str, Any] = {"groups": groups, "rounds": rounds, "top_ks": top_ks}
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn)
        transport: Transport | None = None
        try:
            report["fill_s"] = round(_fill(conn, queue, groups, fill_timeout), 1)
            print(f"filled {groups:,} groups in {report['fill_s']} s", file=sys.stderr)
            conn.execute("SELECT set_config('statement_timeout', %s, false)", [f"{fill_timeout}s"])
            conn.execute("VACUUM ANALYZE pgque_fifo.groups")
            conn.execute("VACUUM ANALYZE pgque_fifo.messages")
            transport = connect(url, queue=queue)
            report |= _measure(transport, groups, rounds, top_ks)
        finally:
            if transport is not None:
                transport.close()
            conn.execute(DROP_MESSAGES, [queue])
            conn.execute(DROP_GROUPS, [queue])
    return report


def run_redis(url: str, groups: int, rounds: int, top_ks: list[int]) -> dict[str, Any]:
    """Fill through the public API (publish_many, claim_many, pause), measure, purge."""
    queue = f"bench_ms_{uuid.uuid4().hex[:10]}"
    report: dict[str, Any] = {"groups": groups, "rounds": rounds, "top_ks": top_ks}
    with connect(url, queue=queue, max_attempts=1, on_exhausted="block") as transport:
        try:
            start = time.perf_counter()
            # The held groups first, so they hold the oldest heads, as in the SQL fill.
            transport.publish_many([(f"g{i:07}", Event(kind="x")) for i in range(1, HELD + 1)])
            for lease in transport.claim_many(HELD, visibility=3600):
                assert transport.nack(lease)  # exhausted: the next claim blocks the group
            assert transport.claim_many(HELD) == []
            for i in range(HELD + 1, 2 * HELD + 1):
                transport.pause(f"g{i:07}")
            for first in range(HELD + 1, groups + 1, 1000):
                batch = range(first, min(first + 1000, groups + 1))
                transport.publish_many([(f"g{i:07}", Event(kind="x")) for i in batch])
            parked = transport.claim_many(HELD, visibility=3600)
            for lease in parked:
                assert transport.nack(lease, delay=3600)
            leased = transport.claim_many(HELD, visibility=3600)
            assert len(parked) == len(leased) == HELD
            report["fill_s"] = round(time.perf_counter() - start, 1)
            print(f"filled {groups:,} groups in {report['fill_s']} s", file=sys.stderr)
            report |= _measure(transport, groups, rounds, top_ks)
        finally:
            transport.purge()  # type: ignore[attr-defined]
    return report


def _print(report: dict[str, Any]) -> None:
    print(f"{report['groups']:,} groups: median of {report['rounds']} rounds (lowest-highest)")
    for name, r in report["results"].items():
        read = report["scanned"].get(name)
        extra = f"   {int(read):,} head series" if read is not None else ""
        print(f"{name:26} {r['median_ms']:9.1f} ms ({r['low_ms']:.1f}-{r['high_ms']:.1f}){extra}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a PostgreSQL or Redis URL (a local server unless --any-host)")
    parser.add_argument("--groups", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--top-ks", default="0,10,100", help="comma separated")
    parser.add_argument("--fill-timeout", type=float, default=600.0, help="seconds per statement")
    parser.add_argument("--any-host", action="store_true", help="allow a server that is not local")
    args = parser.parse_args(argv)
    _check_host(args.url, args.any_host)
    if args.groups < HELD * 5:
        raise SystemExit(f"--groups must be at least {HELD * 5}")
    limits = [int(s) for s in args.top_ks.split(",")]
    if urlsplit(args.url).scheme in {"redis", "rediss"}:
        report = run_redis(args.url, args.groups, args.rounds, limits)
    else:
        report = run(args.url, args.groups, args.rounds, limits, args.fill_timeout)
    _print(report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
