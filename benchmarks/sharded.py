"""Throughput of the sharded layer over 1 and 3 PostgreSQL primaries, beside a plain transport
(or, with ``--redis``, of a Redis Cluster beside one Redis node).

    python benchmarks/sharded.py [--groups G] [--per-group M] [--rounds R] [--batch B]
                                 [--urls URL URL URL] [--redis [REDIS_URL]]

Three throwaway PostgreSQL clusters are started (initdb, free loopback ports) and removed
after, unless ``--urls`` names three servers (then fresh queues on them are used and purged).
Each case drains the same backlog (G groups x M messages, published untimed) with one client
running the worker's steady-state loop: ``settle_and_claim(acks of the last batch, B)`` until
the queue is empty. Cases:

- ``plain``: a PostgresTransport on the first server (no sharded layer);
- ``sharded-1``: a ShardedTransport over that one transport (the layer's own cost);
- ``sharded-3``: a ShardedTransport over one transport per server.

Cases run in interleaved rounds (plain, sharded-1, sharded-3, plain, ...); the table gives the
median messages per second over the rounds and the spread (lowest-highest round). On a small
machine the three primaries share the same cores: the numbers show the layer's overhead and
shape, not a speed-up. One line of JSON follows the table.

With ``--redis`` a throwaway six-node Redis Cluster (three primaries with a replica each, free
loopback ports) is started and removed after, and the cases are:

- ``node``: a RedisTransport on one Redis server (REDIS_URL, default
  ``redis://127.0.0.1:6379/0``; fresh queues, purged);
- ``cluster``: one queue on the cluster (``redis+cluster://``, writes wait for a replica);
- ``cluster-nowait``: the same with ``wait_replicas=0``;
- ``sharded-cluster``: a ShardedTransport over six sub-queues of the cluster whose names
  ``spread_queue_names`` spread over its three primaries (each waits for a replica).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from pgque.core import Event, Settlement, Transport
from pgque.postgres import PostgresTransport
from pgque.sharding import ShardedTransport

CASES = ("plain", "sharded-1", "sharded-3")
REDIS_CASES = ("node", "cluster", "cluster-nowait", "sharded-cluster")


def _open(case: str, urls: list[str], queue: str) -> Transport:
    if case in REDIS_CASES:
        return _open_redis(case, urls, queue)

    def shard(url: str, k: int) -> PostgresTransport:
        return PostgresTransport.from_dsn(url, queue=f"{queue}_s{k}", min_size=1, max_size=2)

    if case == "plain":
        return PostgresTransport.from_dsn(urls[0], queue=queue, min_size=1, max_size=2)
    if case == "sharded-1":
        return ShardedTransport([shard(urls[0], 0)], queue=queue)
    return ShardedTransport([shard(url, k) for k, url in enumerate(urls)], queue=queue)


def _open_redis(case: str, urls: list[str], queue: str) -> Transport:
    """*urls*: the one node's URL, then the cluster's ``redis+cluster://`` URL."""
    from pgque.core import connect
    from pgque.redis import spread_queue_names

    node, cluster = urls
    if case == "node":
        return connect(node, queue=queue)
    if case == "cluster":
        return connect(cluster, queue=queue)
    if case == "cluster-nowait":
        return connect(cluster, queue=queue, wait_replicas=0)
    first = connect(cluster, queue=f"{queue}_0")
    names = spread_queue_names(first, queue, 6)
    first.close()
    return ShardedTransport([connect(cluster, queue=name) for name in names], queue=queue)


def _drain(transport: Transport, batch: int) -> int:
    """Run settle_and_claim until nothing comes back; return how many messages were acked."""
    done = 0
    leases = transport.settle_and_claim([], batch, 60.0).leases
    while leases:
        result = transport.settle_and_claim([Settlement.ack(x) for x in leases], batch, 60.0)
        done += sum(result.settled)
        leases = result.leases
    return done


def _round(case: str, urls: list[str], groups: int, per_group: int, batch: int) -> float:
    """Publish the backlog (untimed), drain it (timed); return messages per second."""
    queue = f"bench_{uuid.uuid4().hex[:12]}"
    transport = _open(case, urls, queue)
    try:
        for n in range(per_group):
            transport.publish_many(
                [(f"g{g:05d}", Event(kind="b", data={"n": n})) for g in range(groups)]
            )
        start = time.perf_counter()
        done = _drain(transport, batch)
        elapsed = time.perf_counter() - start
        total = groups * per_group
        if done != total:
            raise SystemExit(f"{case}: drained {done} of {total} messages")
        return total / elapsed
    finally:
        purge: Callable[[], None] | None = getattr(transport, "purge", None)
        if purge is not None:
            purge()
        transport.close()


@contextlib.contextmanager
def _servers(urls: list[str] | None, redis: str | None = None) -> Iterator[list[str]]:
    if redis is not None:
        from pgque.conformance.servers.redis_cluster import RedisClusterServer

        with RedisClusterServer() as cluster:
            yield [redis, cluster.url]
        return
    if urls:
        yield urls
        return
    from pgque.conformance.servers.many import PostgresServers

    with PostgresServers(3) as servers:
        yield servers.urls


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; print the table and one JSON line; return the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--per-group", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--urls", nargs=3, default=None, metavar="URL")
    parser.add_argument(
        "--redis", nargs="?", const="redis://127.0.0.1:6379/0", default=None, metavar="REDIS_URL"
    )
    args = parser.parse_args(argv)
    cases = REDIS_CASES if args.redis is not None else CASES
    rates: dict[str, list[float]] = {case: [] for case in cases}
    with _servers(args.urls, args.redis) as urls:
        for _ in range(args.rounds):
            for case in cases:  # interleaved: a drift of the machine hits every case alike
                rates[case].append(_round(case, urls, args.groups, args.per_group, args.batch))
    report: dict[str, Any] = {
        "messages": args.groups * args.per_group,
        "groups": args.groups,
        "batch": args.batch,
        "rounds": args.rounds,
        "cases": {},
    }
    base = statistics.median(rates[cases[0]])
    print(
        f"{report['messages']:,} messages over {args.groups} groups, settle_and_claim batches of"
        f" {args.batch}, {args.rounds} interleaved rounds (median, lowest-highest)"
    )
    print(f"{'case':<15} {'msg/s':>9} {'spread':>17} {'vs ' + cases[0]:>9}")
    for case, values in rates.items():
        median = statistics.median(values)
        report["cases"][case] = {
            "median": round(median, 1),
            "low": round(min(values), 1),
            "high": round(max(values), 1),
            "ratio": round(median / base, 3),
        }
        spread = f"{min(values):,.0f}-{max(values):,.0f}"
        print(f"{case:<15} {median:>9,.0f} {spread:>17} {median / base:>8.2f}x")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
