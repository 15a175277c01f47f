"""Run a command while other processes keep the machine's cores busy.

    python tools/busy.py [--cores N] -- COMMAND [ARG...]

Starts N processes (default: one per core) that spin at full speed, at the same scheduling
priority as the command, runs COMMAND, stops the spinners, and exits with COMMAND's status. A
test that passes only on an idle machine (a timing, a call count, an ordering that depends on
which thread runs first) fails here; docs/testing.md says how the suite is checked this way.
The spinners stop when COMMAND ends, and on their own after --limit seconds (default 3 hours)
if this process is killed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time


def _spin(limit: float) -> None:
    """Keep one core busy until *limit* seconds have passed."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        for _ in range(100_000):
            pass


def main(argv: list[str] | None = None) -> int:
    """Run the command of *argv* beside the spinners; return its exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="spinners")
    parser.add_argument("--limit", type=float, default=3 * 3600.0, help="seconds at most")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.cores < 1:
        parser.error("give --cores >= 1 and a command after --")
    spinners = [
        multiprocessing.Process(target=_spin, args=(args.limit,), daemon=True)
        for _ in range(args.cores)
    ]
    for spinner in spinners:
        spinner.start()
    print(f"busy: {args.cores} spinning processes beside: {' '.join(command)}", flush=True)
    try:
        return subprocess.call(command)
    finally:
        for spinner in spinners:
            spinner.terminate()
        for spinner in spinners:
            spinner.join()


if __name__ == "__main__":
    sys.exit(main())
