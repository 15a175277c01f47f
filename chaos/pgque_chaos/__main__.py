"""``python -m pgque_chaos``: run the fault scenarios on throwaway servers and print the table.

Exit status 1 when any scenario lost a message or broke a guarantee.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pgque_chaos.harness import Outcome, Scenario, as_json, run_scenario
from pgque_chaos.servers import ThrowawayPostgres, ThrowawayRedis

__all__ = ["scenarios", "main"]

FAULTS = ("kill", "restart", "cut", "drop", "slow", "clock", "caps", "once", "once_plain")
BACKENDS = ("postgres", "redis")


def scenarios(backend: str, *, quick: bool) -> list[Scenario]:
    """Return the fault scenarios for *backend*, at CI size when *quick*."""
    if quick:
        size: dict[str, Any] = {"groups": 20, "per_group": 15, "workers": 3, "concurrency": 3}
        many, few, timeout = 40, 3, 90.0
    else:
        size = {"groups": 200, "per_group": 100, "workers": 4, "concurrency": 4}
        many, few, timeout = 400, 6, 900.0
    base = Scenario(fault="none", backend=backend, timeout_s=timeout, **size)
    out = [
        # handlers long enough that a worker is almost always killed mid-handler
        replace(
            base,
            fault="kill",
            work_s=(0.005, 0.03),
            faults=few * 2,
            every_s=(0.4, 1.0) if quick else (1.5, 4.0),  # spread over the whole run
        ),
        # handlers slow enough that the queue outlasts the restarts
        replace(
            base,
            fault="restart",
            work_s=(0.08, 0.16) if quick else (0.02, 0.06),
            faults=few,
            every_s=(0.6, 1.2) if quick else (1.0, 3.0),
            visibility=3.0,
        ),
        # short handlers: most of a worker's time is spent in claim and ack round trips
        replace(
            base,
            fault="cut",
            per_group=base.per_group * (4 if quick else 2),
            work_s=(0.0, 0.002),
            faults=many,
            every_s=(0.01, 0.04),
        ),
        # the connection dies after the server ran the command, before its reply arrived
        replace(
            base,
            fault="drop",
            per_group=base.per_group * (4 if quick else 2),
            work_s=(0.0, 0.002),
            faults=many,
            every_s=(0.01, 0.04),
        ),
        replace(
            base,
            fault="slow",
            visibility=1.0,
            extend=False,
            slow_fraction=0.05 if quick else 0.005,
            slow_s=1.6,
        ),
        replace(
            base,
            fault="clock",
            visibility=1.0,
            slow_fraction=0.05 if quick else 0.005,
            slow_s=1.6,  # longer than the lease: only renewals judged by the server keep it
            clock_offsets=(3600.0, -3600.0, 0.0),
        ),
    ]
    # Fairness caps: groups under four keys capped at 1, 2, 3 and 5 (fewer than the slots);
    # kills, cuts and SIGTERMs, 5% of first attempts failing (nacks), 3% overrunning their
    # lease with renewals off (expiries). The store is sampled every 10 ms.
    out.append(
        replace(
            base,
            fault="caps",
            caps=(1, 2, 3, 5),
            work_s=(0.005, 0.03),
            visibility=2.0,
            extend=False,
            slow_fraction=0.03,
            slow_s=2.5,
            fail_fraction=0.05,
            faults=few * 3 if quick else few * 10,
            every_s=(0.3, 0.8),
        )
    )
    if backend == "postgres":
        # Effectively once (settle_in): one row per message through kills, cuts and restarts;
        # the same run with the row written before the ack counts the duplicates it prevents.
        for fault, effect in (("once", "tx"), ("once_plain", "plain")):
            out.append(
                replace(
                    base,
                    fault=fault,
                    effect=effect,
                    work_s=(0.005, 0.03),
                    visibility=2.0,
                    faults=few * 3 if quick else few * 10,
                    every_s=(0.3, 0.8),
                )
            )
    return out


def _table(outcomes: list[Outcome]) -> str:
    head = ("scenario", "events", "faults", "lost", "duplicates", "violations", "redelivered",
            "fenced acks", "extra effect rows", "seconds")  # fmt: skip
    rows = [head]
    for o in outcomes:
        v = o.verdict
        rows.append(
            (o.scenario, str(o.events), str(o.faults), str(v.lost), str(v.duplicates),
             str(len(v.violations)), str(v.redeliveries), str(v.fenced_acks),
             str(o.notes.get("effect_rows_extra", "-")), f"{o.seconds:.1f}")
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the chosen scenarios and report; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m pgque_chaos", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="CI size (small workload)")
    parser.add_argument("--backend", action="append", choices=BACKENDS, help="repeatable")
    parser.add_argument("--fault", action="append", choices=FAULTS, help="repeatable")
    parser.add_argument("--json", type=Path, help="write the report here too")
    parser.add_argument("--keep", action="store_true", help="keep the workers' records")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    # The harness's own pool meets the faults too; its reconnect warnings are expected noise.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    backends = args.backend or list(BACKENDS)
    faults = args.fault or list(FAULTS)
    command = "python -m pgque_chaos " + shlex.join(sys.argv[1:] if argv is None else argv)
    root = Path(tempfile.mkdtemp(prefix="pgque-chaos-"))
    outcomes: list[Outcome] = []
    for backend in backends:
        server = ThrowawayPostgres() if backend == "postgres" else ThrowawayRedis()
        try:
            server.start()
            for s in scenarios(backend, quick=args.quick):
                if s.fault not in faults:
                    continue
                print(f"-- {s.name}: {s.groups * s.per_group} events ...", flush=True)
                begun = time.monotonic()
                outcome = run_scenario(s, server, root / backend / s.fault, seed=args.seed)
                outcomes.append(outcome)
                status = "ok" if outcome.verdict.ok else "FAILED"
                print(f"   {status} in {time.monotonic() - begun:.1f}s", flush=True)
                for problem in outcome.verdict.violations[:10]:
                    print(f"   ! {problem}", flush=True)
        finally:
            server.stop()
    report = as_json(outcomes, command)
    print()
    print(_table(outcomes))
    text = json.dumps(report, indent=2)
    out = args.json or root / "report.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n", encoding="utf-8")
    print(f"\nreport: {out}")
    if not args.keep and report["ok"]:
        for backend in backends:
            shutil.rmtree(root / backend, ignore_errors=True)
        if args.json:  # the report is elsewhere: nothing left worth keeping
            shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"records: {root}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
