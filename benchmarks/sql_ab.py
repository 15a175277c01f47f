"""Compare the per-call latency of pgque's SQL functions in two schema versions, side by side.

    mkdir base && git archive <rev> shared-sql | tar -x -C base
    python benchmarks/sql_ab.py URL --baseline base/shared-sql [--current shared-sql]

URL is a PostgreSQL URL. A schema is given as a ``shared-sql`` folder (its fresh-install
script is the files of ``schema/`` in file-name order, or ``schema.sql`` in a revision from
before that split) or as one script file. Both fresh-install scripts (the baseline and, by
default, this checkout's) are installed side by side under the schemas
``pgque_ab_base`` and ``pgque_ab_new`` (their schema name rewritten), so both start from empty
tables, and both are dropped at the end; pgque's own schema is not touched. Each round runs every
operation against both versions, in a random order per round, on one connection with
autocommit (one statement, one transaction, as the transports run them), on fresh queues; the
report is the median over rounds of the mean time per call, in microseconds, and the ratio
new/baseline. Numbers drift between machines and runs; the ratio measured in one run is what
holds. One line of JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

BASE = "pgque_ab_base"
NEW = "pgque_ab_new"
CURRENT = Path(__file__).resolve().parents[1] / "shared-sql"
#: A file of a fresh-install script folder: two digits (its place in the order), a name.
_SCHEMA_FILE = re.compile(r"^\d{2}_[a-z0-9_]+\.sql$")
_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)
Conn = psycopg.Connection[tuple[Any, ...]]


def _statements() -> dict[str, str]:
    text = (Path(__file__).with_name("sql_ab.sql")).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    out: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.startswith("--")]
        out[name] = "\n".join(lines).strip()
    return out


STATEMENTS = _statements()


def _query(name: str, schema: str) -> sql.Composed:
    return sql.SQL(STATEMENTS[name]).format(schema=sql.Identifier(schema))


def _script(path: Path) -> str:
    """Return the fresh-install script *path* names: a shared-sql folder or one file.

    Raises FileNotFoundError when a folder holds neither ``schema/`` nor ``schema.sql``.
    """
    if not path.is_dir():
        return path.read_text(encoding="utf-8")
    folder = path / "schema"
    if folder.is_dir():
        files = sorted(f for f in folder.iterdir() if _SCHEMA_FILE.match(f.name))
        return "\n".join(f.read_text(encoding="utf-8") for f in files)
    return (path / "schema.sql").read_text(encoding="utf-8")


def _install(conn: Conn, path: Path, schema: str) -> None:
    script = _script(path).replace("pgque_fifo", schema)
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    with conn.transaction():
        conn.execute(script.encode("utf-8"))


def _timed(conn: Conn, name: str, schema: str, params: list[dict[str, Any]]) -> float:
    """Run statement *name* once per params; return the mean seconds per call."""
    query = _query(name, schema)
    start = time.perf_counter()
    for p in params:
        conn.execute(query, p).fetchall()
    return (time.perf_counter() - start) / max(1, len(params))


def _round(conn: Conn, schema: str, calls: int) -> dict[str, float]:
    """Time every operation once against *schema*; return seconds per call by operation."""
    q = f"ab_{uuid.uuid4().hex[:12]}"
    groups = [f"g{i:04d}" for i in range(calls)]
    out: dict[str, float] = {}
    out["publish"] = _timed(conn, "publish", schema, [{"q": q, "g": g} for g in groups])
    out["stats"] = _timed(conn, "stats", schema, [{"q": q}] * 20)
    leases: list[tuple[str, int, str]] = []
    claim = _query("claim", schema)
    start = time.perf_counter()
    for _ in range(calls):
        row = conn.execute(claim, {"q": q}).fetchone()
        assert row is not None
        leases.append((row[0], row[1], row[2]))
    out["claim"] = (time.perf_counter() - start) / calls
    half = calls // 2
    out["ack (drains)"] = _timed(
        conn, "ack", schema, [{"q": q, "g": g, "m": m, "t": t} for g, m, t in leases[:half]]
    )
    out["dead_letter"] = _timed(
        conn, "dead_letter", schema, [{"q": q, "g": g, "m": m, "t": t} for g, m, t in leases[half:]]
    )
    out["redrive (per dead letter)"] = _timed(conn, "redrive", schema, [{"q": q}]) / (calls - half)
    out["purge (per message)"] = _timed(conn, "purge", schema, [{"q": q}]) / (calls - half)
    out["dedup publish"] = _timed(
        conn, "dedup", schema, [{"q": q, "g": g, "k": f"k{g}"} for g in groups]
    )
    conn.execute(_query("purge", schema), {"q": q})
    conn.execute(_query("partition_purge", schema), {"q": q})
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the interleaved rounds and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("url")
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--current", type=Path, default=CURRENT)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    results: dict[str, dict[str, list[float]]] = {BASE: {}, NEW: {}}
    with psycopg.connect(args.url, autocommit=True) as conn:
        _install(conn, args.baseline, BASE)
        _install(conn, args.current, NEW)
        try:
            order: Callable[[], list[str]] = lambda: random.sample([BASE, NEW], 2)  # noqa: E731
            _round(conn, BASE, 20)  # warm both plan caches before timing
            _round(conn, NEW, 20)
            for _ in range(args.rounds):
                for schema in order():
                    for op, seconds in _round(conn, schema, args.calls).items():
                        results[schema].setdefault(op, []).append(seconds)
        finally:
            for schema in (BASE, NEW):
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
    report: dict[str, Any] = {"rounds": args.rounds, "calls": args.calls, "ops": {}}
    print(f"{'operation':28} {'baseline us':>12} {'new us':>10} {'new/base':>9}")
    for op in results[NEW]:
        base = statistics.median(results[BASE][op]) * 1e6
        new = statistics.median(results[NEW][op]) * 1e6
        report["ops"][op] = {"baseline_us": round(base, 1), "new_us": round(new, 1)}
        print(f"{op:28} {base:12.1f} {new:10.1f} {new / base:9.2f}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
