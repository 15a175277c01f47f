"""What benchmarks/scheduling.py (PostgreSQL) and benchmarks/scheduling_redis.py share: the
local-server guard, one timed round of claim + ack through the contract, and the report."""

from __future__ import annotations

import statistics
import time
from typing import Any
from urllib.parse import urlsplit

from pgque.core import Event, Transport

#: Hosts the scripts fill without --any-host.
LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost"}


def check_host(url: str, any_host: bool) -> None:
    """Refuse (SystemExit) to fill a server that is not local unless *any_host*."""
    host = urlsplit(url).hostname or "localhost"
    if not any_host and host not in LOCAL_HOSTS:
        raise SystemExit(f"refusing to fill {host!r} with a million messages; pass --any-host")


def claim_round(transport: Transport, claims: int) -> float:
    """Publish *claims* messages (untimed), then time claim + ack of each; return the median."""
    transport.publish_many([(f"c{i % 50}", Event(kind="c")) for i in range(claims)])
    samples = []
    for _ in range(claims):
        start = time.perf_counter()
        lease = transport.claim()
        assert lease is not None, "a published message was expected"
        assert transport.ack(lease)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def print_report(report: dict[str, Any]) -> None:
    """Print what a run measured, as docs/benchmarks.md quotes it."""
    claim = report["claim"]
    print(
        f"(a) claim + ack of one message, median of {report['rounds']} rounds"
        f" x {report['claims']} (spread: lowest-highest round median)"
    )
    for key, label in (("empty", "no scheduled"), ("full", f"{report['scheduled']:,} scheduled")):
        r = claim[key]
        print(f"    {label:>22}: {r['median_ms']:.3f} ms ({r['low_ms']:.3f}-{r['high_ms']:.3f})")
    print(f"    ratio: {claim['ratio']:.2f}x")
    due = report["due"]
    print(
        f"(b) due time -> handler start, {due['n']} messages: median {due['median_ms']:.1f} ms,"
        f" p99 {due['p99_ms']:.1f} ms, max {due['max_ms']:.1f} ms, min {due['min_ms']:.1f} ms"
    )
