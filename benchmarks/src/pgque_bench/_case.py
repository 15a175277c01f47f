"""One measurement in a process of its own: ``python -m pgque_bench._case SPEC``.

*SPEC* is the JSON of ``{"kind": ..., "postgres": url, "redis": url, "args": {...}}``; the
process prints one line, :data:`MARK` followed by the JSON of the result (or of
``{"error": ...}``), and exits 0. Running every case in a fresh interpreter keeps the systems
from sharing one: no warm imports, pools or allocator state carried from one to the next.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

MARK = "PGQUE_BENCH_RESULT "


def _measure(spec: dict[str, Any]) -> dict[str, Any]:
    from pgque_bench import (
        _dashboard,
        _history,
        _peers,
        _postgres,
        _stats,
        _systems,
        _tasks,
        _tenants,
    )

    kind: str = spec["kind"]
    args: dict[str, Any] = dict(spec.get("args", {}))
    postgres: str | None = spec.get("postgres")
    redis: str | None = spec.get("redis")

    def system() -> _systems.System:
        return _systems.system_named(args.pop("system"), postgres, redis)

    def pg() -> _systems.System:
        return _systems.system_named("postgres", postgres, redis)

    def pgbench_exe() -> str:
        exe = _postgres.find_pgbench()
        if exe is None:
            raise FileNotFoundError("pgbench not found")
        return exe

    def url() -> str:
        if not postgres:
            raise KeyError("no PostgreSQL server")
        return postgres

    actions: dict[str, Callable[[], dict[str, Any]]] = {
        "transport": lambda: _systems.transport_drain(system(), **args),
        "worker": lambda: _systems.worker_drain(system(), **args),
        "publish": lambda: _systems.publish(system(), **args),
        "latency": lambda: _systems.latency(system(), **args),
        "fairness": lambda: _systems.fairness(system(), **args),
        "task_worker": lambda: _tasks.task_worker_drain(system(), **args),
        "defer_many": lambda: _tasks.defer_many(system(), **args),
        "publish_built": lambda: _tasks.publish_built(system(), **args),
        "tenants_shares": lambda: _tenants.shares(system(), **args),
        "tenants_noisy": lambda: _tenants.noisy(system(), **args),
        "tenants_rates": lambda: _tenants.rates(system(), **args),
        "tenants_cost": lambda: _tenants.cost(system(), **args),
        "history_prune": lambda: _history.prune(system(), **args),
        "stats_cost": lambda: _stats.stats_cost(system(), **args),
        "dashboard_pages": lambda: _dashboard.pages(url(), **args),
        "pgbench": lambda: _postgres.pgbench_drain(pgbench_exe(), pg(), **args),
        "pgbench_publish": lambda: _postgres.pgbench_publish(pgbench_exe(), pg(), **args),
        "scale": lambda: _postgres.scale(pg(), **args),
        "xmin": lambda: _postgres.churn(pg(), **args),
        "pgqueuer": lambda: _peers.pgqueuer_drain(url(), **args),
        "pgqueuer_startup": lambda: _peers.pgqueuer_startup(url(), **args),
        "pgqueuer_publish": lambda: _peers.pgqueuer_publish(url(), **args),
        "procrastinate": lambda: _peers.procrastinate_drain(url(), **args),
        "procrastinate_startup": lambda: _peers.procrastinate_startup(url(), **args),
    }
    if kind not in actions:
        raise KeyError(f"unknown case kind {kind!r}")
    if postgres:  # every case starts on vacuumed tables, pgque's and the peers' alike
        _postgres.vacuum(postgres)
        _postgres.vacuum(_peers.peer_url(postgres))
    return actions[kind]()


def error_text(exc: BaseException) -> str:
    """Return the one-line error a failed case records (a drainer's error as it was)."""
    from pgque_bench._systems import DrainFailed

    if isinstance(exc, DrainFailed):
        return str(exc)[:300]
    return f"{type(exc).__name__}: {exc}"[:300]


def run_here(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the case *spec* in this process; return its result or ``{"error": ...}``."""
    try:
        return _measure(spec)
    except Exception as exc:
        return {"error": error_text(exc)}


def run_isolated(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run the case *spec* in a fresh interpreter; return its result or ``{"error": ...}``."""
    command = [sys.executable, "-m", "pgque_bench._case", json.dumps(spec)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            result: dict[str, Any] = json.loads(line[len(MARK) :])
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": f"case process exited {proc.returncode}: {' | '.join(tail)}"[:300]}


def main() -> int:
    """Run the case given as the first argument and print its result line."""
    result = run_here(json.loads(sys.argv[1]))
    print(MARK + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
