"""A worker process for the signal tests: ``python _signal_worker.py KIND HANDLER_S GRACE``.

It fills an in-memory queue, runs a worker (concurrency 2) until a signal stops it, and prints
STARTED/DONE lines as handlers run and, last, one JSON line with the report and the queue's
stats.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time

from pgque.core import (
    AsyncInMemoryTransport,
    AsyncWorker,
    Event,
    InMemoryTransport,
    MemoryStore,
    Worker,
)

_out = threading.Lock()


def say(text: str) -> None:
    # one write per line under a lock: print() from two handler threads can interleave
    with _out:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def main() -> None:
    kind, handler_s, grace = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    for i in range(6):
        queue.publish(f"g{i}", Event(kind="job", data={"i": i}))
    options = {"concurrency": 2, "visibility": 5.0, "shutdown_grace": grace, "name": "sig"}

    if kind == "sync":

        def handler(event: Event) -> None:
            say(f"STARTED {event.data['i']}")  # type: ignore[call-overload, index]
            time.sleep(handler_s)
            say(f"DONE {event.data['i']}")  # type: ignore[call-overload, index]

        report = Worker(InMemoryTransport(store=store), handler, **options).run()  # type: ignore[arg-type]
    else:

        async def async_handler(event: Event) -> None:
            say(f"STARTED {event.data['i']}")  # type: ignore[call-overload, index]
            await asyncio.sleep(handler_s)
            say(f"DONE {event.data['i']}")  # type: ignore[call-overload, index]

        worker = AsyncWorker(AsyncInMemoryTransport(store=store), async_handler, **options)  # type: ignore[arg-type]
        report = asyncio.run(worker.run())
    stats = queue.stats()
    say(json.dumps({"report": report.as_dict(), "stats": stats.model_dump()}))


if __name__ == "__main__":
    main()
