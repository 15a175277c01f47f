"""Throughput of ``pgque worker --processes 2`` against ``--processes 1`` on a CPU-bound handler.

Usage: ``python benchmarks/processes.py 'postgresql://HOST/DB?queue=NAME' [--messages 1500]
[--rounds 5] [--work-ms 5] [--concurrency 2]``

The handler burns ``--work-ms`` of pure-Python CPU per message (a loop calibrated once here, so
every process runs the same loop), which one process cannot spread over cores (the GIL). Each
round fills the queue (MESSAGES over 300 groups) and drains it with ``pgque worker
--stop-when-idle`` once per setting, in alternating order (a noisy machine drifts; interleaved
rounds share the drift). A run's rate counts from its first handler start to its last handler
end (each process records both), so that interpreter start-up and the idle tail of
``--stop-when-idle`` are left out. Prints each setting's median rate and its spread (min-max),
the ratio of the medians and the median and spread of the per-round ratios. It purges the
queue it is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pgque.core import Event, connect

GROUPS = 300

#: The handler the workers run; {loops} is filled in with the calibrated count. Each process
#: writes its first start, last end and count into the folder named by BENCH_OUT.
HANDLER = """
import atexit, os, time

LOOPS = {loops}
_times = []


def handle(event):
    start = time.time()
    total = 0
    for i in range(LOOPS):
        total += i * i
    _times.append((start, time.time()))


@atexit.register
def _report():
    if _times:
        with open(os.path.join(os.environ["BENCH_OUT"], str(os.getpid())), "w") as fh:
            busy = sum(end - start for start, end in _times)
            last = max(end for _, end in _times)
            fh.write(f"{{_times[0][0]}} {{last}} {{len(_times)}} {{busy}}")
"""


def calibrate(work_ms: float) -> int:
    """Return how many iterations of the handler's loop take *work_ms* here (best of 5)."""
    loops = 100_000
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        total = 0
        for i in range(loops):
            total += i * i
        best = min(best, time.perf_counter() - start)
    return max(1, round(loops * work_ms / 1000 / best))


def fill(url: str, messages: int) -> None:
    """Purge the queue and publish *messages* over GROUPS groups."""
    with connect(url) as transport:
        transport.purge()  # type: ignore[attr-defined]
        items = [(f"g{i % GROUPS}", Event(kind="cpu")) for i in range(messages)]
        for first in range(0, messages, 1000):
            transport.publish_many(items[first : first + 1000])


def drain(
    url: str, folder: Path, processes: int, concurrency: int, messages: int
) -> tuple[float, float]:
    """Drain the queue with ``pgque worker --processes N``; return messages per second and
    the mean time a handler took (milliseconds, wall clock: it grows when cores are short)."""
    out = folder / f"times-{processes}-{time.monotonic_ns()}"
    out.mkdir()
    command = [sys.executable, "-m", "pgque.core.cli", "worker", "bench_cpu:handle"]
    command += ["--url", url, "--processes", str(processes), "-c", str(concurrency)]
    command += ["--stop-when-idle", "--log-level", "WARNING"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGQUE_")}
    env["BENCH_OUT"] = str(out)
    result = subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"the worker failed: {result.stderr.strip()}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if report["acked"] != messages:
        raise SystemExit(f"acked {report['acked']} of {messages} messages")
    spans = [tuple(float(x) for x in p.read_text().split()) for p in out.iterdir()]
    if sum(int(s[2]) for s in spans) != messages:
        raise SystemExit("the handlers did not record every message")
    rate = messages / (max(s[1] for s in spans) - min(s[0] for s in spans))
    return rate, 1000 * sum(s[3] for s in spans) / messages


def main() -> int:
    """Run the rounds and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--messages", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work-ms", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    loops = calibrate(args.work_ms)
    rates: dict[int, list[float]] = {1: [], 2: []}
    handler_ms: dict[int, list[float]] = {1: [], 2: []}
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bench_cpu.py").write_text(HANDLER.format(loops=loops))
        for round_no in range(args.rounds):
            order = (1, 2) if round_no % 2 == 0 else (2, 1)
            for processes in order:
                fill(args.url, args.messages)
                rate, took = drain(args.url, folder, processes, args.concurrency, args.messages)
                rates[processes].append(rate)
                handler_ms[processes].append(took)
                print(
                    f"round {round_no + 1}: --processes {processes}: {rate:.0f} msg/s "
                    f"(handler {took:.2f} ms)",
                    flush=True,
                )
    with connect(args.url) as transport:
        transport.purge()  # type: ignore[attr-defined]
    ratios = [two / one for one, two in zip(rates[1], rates[2], strict=True)]
    summary = {
        "work_ms": args.work_ms,
        "messages": args.messages,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "cpus": os.cpu_count(),
        "loops": loops,
        "load_before": load_before,
        "load_after": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "handler_ms_1": statistics.median(handler_ms[1]),
        "handler_ms_2": statistics.median(handler_ms[2]),
        "rate_1": {
            "median": statistics.median(rates[1]),
            "min": min(rates[1]),
            "max": max(rates[1]),
        },
        "rate_2": {
            "median": statistics.median(rates[2]),
            "min": min(rates[2]),
            "max": max(rates[2]),
        },
        "ratio_of_medians": statistics.median(rates[2]) / statistics.median(rates[1]),
        "round_ratio": {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
        },
    }
    print(json.dumps({k: _rounded(v) for k, v in summary.items()}, sort_keys=True))
    return 0


def _rounded(value: object) -> object:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    sys.exit(main())
