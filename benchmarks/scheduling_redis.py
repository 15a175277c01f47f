"""Measure the two cost figures of scheduled messages on Redis (issue 17).

    python benchmarks/scheduling_redis.py URL [--scheduled 1000000] [--rounds 7] [--claims 200]
                                              [--due 50] [--spacing 0.1]

URL is a Redis URL of a local server (127.0.0.1, ::1 or localhost; ``--any-host`` lifts that).

(a) Claim latency with *scheduled* messages not yet due against none: two throwaway queues, one
given ``--scheduled`` messages due a day or more ahead (``publish_many(..., delay=)`` in
batches of ``--fill-batch``, so Redis is never held long). Each round publishes ``--claims``
messages into each queue (untimed), then times ``claim()`` + ``ack()`` of one message at a
time, ``--claims`` times per queue, the two queues in an order that alternates between rounds.
Reported: the median over rounds of each round's median, the lowest and highest round median,
and the ratio full / empty.

(b) Due-to-claimable latency: an idle ``AsyncWorker`` (wake-ups on: the transport subscribes to
the queue's wake channel and caps each wait at the next due time) runs on a third queue;
``--due`` messages are published with delays ``0.3 + i x spacing`` seconds, and the handler
records when it starts. Reported: median, p99 and max of (handler start - due time), the due
time being the one Redis recorded (``scheduled()``, read right after each publish). Both sides
read the same machine's clock.

The run's keys are deleted at the end (also after a failure or Ctrl-C) by SCAN and UNLINK in
batches, not by one ``purge()`` script, which would hold Redis while it deletes a million
messages. One line of JSON goes to stdout after the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from typing import Any

import redis
from _scheduling_report import check_host, claim_round, print_report

from pgque.core import AsyncWorker, Event, Lease
from pgque.redis import AsyncRedisTransport, RedisTransport, key_prefix

#: Hosts the benchmark writes a million messages to without --any-host.
#: Seconds from now to the first fill message's due time (a day).
FILL_DELAY = 86_400.0


def _fill(transport: RedisTransport, n: int, batch: int) -> float:
    """Schedule *n* messages, none due for a day, in groups f0..f999; return the seconds."""
    start = time.perf_counter()
    event = Event(kind="x")
    done = 0
    while done < n:
        size = min(batch, n - done)
        items = [(f"f{(done + i) % 1000}", event) for i in range(size)]
        # Later batches are due later: the soonest due time stays a day ahead.
        transport.publish_many(items, delay=FILL_DELAY + done / 1000)
        done += size
    return time.perf_counter() - start


def _claims(
    transports: dict[str, RedisTransport], rounds: int, claims: int
) -> dict[str, dict[str, float] | float]:
    per_round: dict[str, list[float]] = {key: [] for key in transports}
    for transport in transports.values():
        claim_round(transport, 20)  # warm the connection and load the scripts
    for r in range(rounds):
        order = list(transports) if r % 2 == 0 else list(reversed(transports))
        for key in order:
            per_round[key].append(claim_round(transports[key], claims))
    result: dict[str, dict[str, float] | float] = {
        key: {
            "median_ms": statistics.median(values) * 1000,
            "low_ms": min(values) * 1000,
            "high_ms": max(values) * 1000,
        }
        for key, values in per_round.items()
    }
    result["ratio"] = statistics.median(per_round["full"]) / statistics.median(per_round["empty"])
    return result


async def _due_latency(url: str, queue: str, due: int, spacing: float) -> dict[str, float]:
    started: dict[int, float] = {}
    done = asyncio.Event()

    async def handler(_event: Event, lease: Lease) -> None:
        started[lease.message_id] = time.time()
        if len(started) >= due:
            done.set()

    async with AsyncRedisTransport(url, queue=queue) as transport:
        worker = AsyncWorker(transport, handler, idle_backoff=(0.05, 2.0))
        running = asyncio.ensure_future(worker.run(install_signal_handlers=False))
        await asyncio.sleep(1.0)  # the worker is idle, subscribed
        due_at: dict[int, float] = {}
        for i in range(due):
            message_id = await transport.publish("g", Event(kind="d"), delay=0.3 + i * spacing)
            # The due time Redis recorded (0.3 s ahead at the soonest: not yet joined).
            (item,) = await transport.scheduled(limit=1, after=message_id - 1)
            assert item.id == message_id, "the message just scheduled was expected"
            due_at[message_id] = item.due_at
        await asyncio.wait_for(done.wait(), timeout=0.3 + due * spacing + 30)
        worker.stop()
        await running
    late = sorted((started[i] - due_at[i]) * 1000 for i in due_at)
    return {
        "n": len(late),
        "median_ms": statistics.median(late),
        "p99_ms": late[min(len(late) - 1, round(0.99 * (len(late) - 1)))],
        "max_ms": late[-1],
        "min_ms": late[0],
    }


def _drop(client: redis.Redis, queue: str) -> None:
    """Delete every key of *queue*, a thousand at a time."""
    pattern = key_prefix(queue).replace("[", "\\[") + "*"
    batch: list[Any] = []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            client.unlink(*batch)
            batch = []
    if batch:
        client.unlink(*batch)


def run(
    url: str, scheduled: int, rounds: int, claims: int, due: int, spacing: float, batch: int
) -> dict[str, Any]:
    """Fill, measure and clean up; return the report."""
    tag = uuid.uuid4().hex[:10]
    queues = {"empty": f"bench_sched_{tag}_empty", "full": f"bench_sched_{tag}_full"}
    due_queue = f"bench_sched_{tag}_due"
    report: dict[str, Any] = {"scheduled": scheduled, "rounds": rounds, "claims": claims}
    client = redis.Redis.from_url(url)
    transports = {key: RedisTransport(url, queue=queue) for key, queue in queues.items()}
    try:
        report["fill_s"] = round(_fill(transports["full"], scheduled, batch), 1)
        stats = transports["full"].stats()
        assert stats.scheduled == scheduled, "every fill message should be scheduled"
        print(f"scheduled {scheduled:,} messages in {report['fill_s']} s", file=sys.stderr)
        report["claim"] = _claims(transports, rounds, claims)
        report["due"] = asyncio.run(_due_latency(url, due_queue, due, spacing))
    finally:
        for transport in transports.values():
            transport.close()
        for queue in (*queues.values(), due_queue):
            _drop(client, queue)
        client.close()
    return report


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run the measurement and print the report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("url", help="a Redis URL (a local server unless --any-host)")
    parser.add_argument("--scheduled", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--claims", type=int, default=200, help="claims per queue and round")
    parser.add_argument("--due", type=int, default=50, help="delayed messages for (b)")
    parser.add_argument("--spacing", type=float, default=0.1, help="seconds between due times")
    parser.add_argument("--fill-batch", type=int, default=2000, help="messages per fill call")
    parser.add_argument("--any-host", action="store_true", help="allow a server that is not local")
    args = parser.parse_args(argv)
    check_host(args.url, args.any_host)
    report = run(
        args.url,
        args.scheduled,
        args.rounds,
        args.claims,
        args.due,
        args.spacing,
        args.fill_batch,
    )
    print_report(report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
