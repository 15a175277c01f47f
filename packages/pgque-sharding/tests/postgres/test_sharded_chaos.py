"""Chaos: a Worker drains a sharded queue over three PostgreSQL primaries while one is down.

The down shard stays down until the handler has seen a number of messages of the other
shards handled *after* it went down (no timing luck: the test waits for that evidence), then
comes back; at the end every message was handled, each group in order, none acked twice.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from pgque.conformance.servers.many import PostgresServers
from pgque.core import Event, Lease, Worker
from pgque.postgres import PostgresTransport
from pgque.sharding import ShardedTransport

GROUPS = 30
PER_GROUP = 20
#: Messages of the other shards the handler must see while the victim is down.
DURING_OUTAGE = 60
VICTIM = 1


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def sharded(postgres_shards: PostgresServers) -> Iterator[ShardedTransport]:
    queue = f"chaos_{uuid.uuid4().hex[:16]}"
    shards = [
        # A short pool timeout: a call to the down shard fails within 2 s (docs/scaling.md).
        PostgresTransport.from_dsn(url, queue=f"{queue}_s{k}", min_size=1, max_size=4, timeout=2.0)
        for k, url in enumerate(postgres_shards.urls)
    ]
    transport = ShardedTransport(shards, queue=queue)
    yield transport
    transport.close()


def test_a_worker_rides_out_one_shard_down_while_the_others_serve(
    sharded: ShardedTransport, postgres_shards: PostgresServers
) -> None:
    victim = postgres_shards.servers[VICTIM]
    groups = [f"g{i:03d}" for i in range(GROUPS)]
    assert {sharded.shard_of(g) for g in groups} == {0, 1, 2}  # every shard has groups
    for n in range(PER_GROUP):
        sharded.publish_many([(g, Event(kind="chaos", data={"n": n})) for g in groups])
    total = GROUPS * PER_GROUP

    lock = threading.Lock()
    handled: list[tuple[str, int]] = []
    outage = threading.Event()
    others_during_outage = 0
    victim_during_outage = 0

    def handle(event: Event, lease: Lease) -> None:
        nonlocal others_during_outage, victim_during_outage
        assert isinstance(event.data, dict)
        with lock:
            n = event.data["n"]
            assert isinstance(n, int)
            handled.append((lease.group_id, n))
            if outage.is_set():
                if sharded.shard_of(lease.group_id) == VICTIM:
                    victim_during_outage += 1
                else:
                    others_during_outage += 1
        time.sleep(0.002)

    worker = Worker(
        sharded,
        handle,
        concurrency=4,
        visibility=2.0,
        idle_backoff=(0.01, 0.1),
        reconnect_backoff=(0.02, 0.2),
    )
    reports = []
    runner = threading.Thread(
        target=lambda: reports.append(
            worker.run(stop_when_idle=True, install_signal_handlers=False)
        )
    )
    runner.start()
    try:
        # Down mid-drain: once the victim's own groups were served too.
        _wait_for(
            lambda: sum(1 for g, _ in list(handled) if sharded.shard_of(g) == VICTIM) >= 10,
            "the victim shard's groups to be served",
        )
        victim.down()
        outage.set()
        _wait_for(
            lambda: others_during_outage >= DURING_OUTAGE,
            f"{DURING_OUTAGE} messages of the other shards during the outage",
        )
        with lock:
            served_while_down = others_during_outage
        victim.up()
        outage.clear()
        runner.join(timeout=120)
        assert not runner.is_alive(), "the worker did not drain the queue"
    finally:
        if runner.is_alive():
            worker.stop()
            runner.join(timeout=30)
    assert served_while_down >= DURING_OUTAGE
    (report,) = reports
    # Every message handled (at least once), each group in publish order: a message comes
    # again only in place of itself (its lease was lost), never after a later one.
    assert {(g, n) for g, n in handled} == {(g, n) for g in groups for n in range(PER_GROUP)}
    for g in groups:
        seen = [n for group, n in handled if group == g]
        assert seen == sorted(seen), f"group {g} out of order: {seen}"
    # No message acked twice: at most one successful ack each, and none left behind.
    assert report.acked <= total
    stats = sharded.stats()
    assert (stats.messages, stats.in_flight, stats.dead_letters) == (0, 0, 0)
