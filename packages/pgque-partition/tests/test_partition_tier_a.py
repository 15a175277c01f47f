"""Tier A (Exclusive): N tenants x 4 duplicate migration events, drop policy, 4/8/16 workers:
exactly N runs that did work and no two workers inside one tenant at once.

CI size: 200 tenants; ``--partition-full``: the issue's 2,000 tenants (8,000 events).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from _partition_support import Make, Recorder, fresh_queue
from psycopg_pool import ConnectionPool

from pgque.conformance.servers.pgbouncer import PgBouncer
from pgque.core.models import Event
from pgque.partition import (
    Exclusive,
    KeyContext,
    KeyedPublisher,
    PartitionConsumer,
    partition_backend,
)
from pgque.postgres import PostgresTransport

DUPLICATES = 4


def _publish(publisher: KeyedPublisher, tenants: int) -> None:
    # Every tenant's 4 duplicates interleaved with the others', as racing producers would.
    for copy in range(DUPLICATES):
        for tenant in range(tenants):
            publisher.send("Migrate", {"tenant": tenant, "copy": copy}, partition_key=f"t{tenant}")


def _handler(recorder: Recorder) -> Any:
    def migrate(event: Event, ctx: KeyContext) -> None:
        key = ctx.key
        assert key is not None
        started = recorder.enter(key)
        try:
            recorder.ensure(key)
        finally:
            recorder.exit(key, started)

    return migrate


@pytest.mark.parametrize("workers", [4, 8, 16])
def test_tier_a_drop_one_worker_per_tenant(
    transport_factory: Make, backend: str, workers: int, full: bool
) -> None:
    tenants = 2000 if full else 200
    events = tenants * DUPLICATES
    # Two "machines", each with half the worker slots, on their own transports.
    first = (
        transport_factory(max_size=workers + 4) if backend == "postgres" else transport_factory()
    )
    more = {"max_size": workers + 4} if backend == "postgres" else {}
    second = transport_factory(queue=first.queue, **more)
    _publish(KeyedPublisher(first, tier=Exclusive()), tenants)
    recorder = Recorder()
    consumers = [
        PartitionConsumer(
            t,
            _handler(recorder),
            tier=Exclusive(contention="drop", lock_ttl=30.0),
            concurrency=workers // 2,
            idle_backoff=(0.01, 0.1),
        )
        for t in (first, second)
    ]
    started = time.monotonic()
    reports: list[Any] = []
    threads = [
        threading.Thread(target=lambda c=c: reports.append(c.run(stop_when_idle=True)))
        for c in consumers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    elapsed = time.monotonic() - started
    ran = sum(c.counts.ran for c in consumers)
    dropped = sum(c.counts.dropped for c in consumers)
    print(
        f"\n[tier A] backend={backend} workers={workers} tenants={tenants} events={events}: "
        f"did work={recorder.did_work} ran={ran} dropped={dropped} "
        f"overlaps={recorder.overlaps()} {events / elapsed:.0f} events/s"
    )
    assert len(reports) == 2
    assert sum(r.acked for r in reports) == events
    assert ran + dropped == events
    assert recorder.did_work == tenants
    assert recorder.overlaps() == 0
    assert max(recorder.max_active.values()) == 1
    assert first.stats().messages == 0


def test_tier_a_defer_retries_a_held_key(transport_factory: Make) -> None:
    transport = transport_factory()
    publisher = KeyedPublisher(transport, tier=Exclusive())
    for copy in range(3):
        publisher.send("Migrate", {"copy": copy}, partition_key="t1")
    recorder = Recorder()

    def slow(event: Event, ctx: KeyContext) -> None:
        started = recorder.enter("t1")
        time.sleep(0.05)
        recorder.exit("t1", started)

    consumer = PartitionConsumer(
        transport,
        slow,
        tier=Exclusive(contention="defer", defer_delay=0.02),
        concurrency=3,
        idle_backoff=(0.01, 0.05),
    )
    report = consumer.run(stop_when_idle=True)
    assert recorder.runs() == 3  # every event ran once, none dropped
    assert recorder.overlaps() == 0
    assert consumer.counts.dropped == 0
    assert consumer.counts.deferred >= 1
    assert report.retried == consumer.counts.deferred


def _server_pid(conn: Any) -> int:
    """The server process behind PgBouncer (the client's backend_pid is PgBouncer's)."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def _two_workers_migrate(
    first: Any, second: Any, pooled: ConnectionPool[Any], server_of: Callable[[Any], int]
) -> tuple[Recorder, list[PartitionConsumer], set[int]]:
    """Run one Exclusive consumer on each transport until idle, both taking their key locks
    from *pooled*; return the recorder, the consumers and the server processes (*server_of*
    each handler's lock connection) that served the locks."""
    recorder = Recorder()
    servers: set[int] = set()

    def migrate(event: Event, ctx: KeyContext) -> None:
        key = ctx.key
        assert key is not None
        assert ctx.connection is not None
        servers.add(server_of(ctx.connection))
        started = recorder.enter(key)
        try:
            recorder.ensure(key, pause=0.002)
        finally:
            recorder.exit(key, started)

    consumers = [
        PartitionConsumer(t, migrate, tier=Exclusive(), lock_pool=pooled, idle_backoff=(0.01, 0.05))
        for t in (first, second)
    ]
    threads = [threading.Thread(target=lambda c=c: c.run(stop_when_idle=True)) for c in consumers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return recorder, consumers, servers


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_tier_a_behind_a_transaction_mode_pooler(
    transport_factory: Make, postgres_url: str
) -> None:
    """Two workers share one server connection, handed back after every transaction (as a
    transaction-mode pooler does): the transaction-scoped lock never lets both hold a key."""
    tenants = 40
    pooled = ConnectionPool(
        postgres_url, min_size=1, max_size=1, kwargs={"autocommit": True}, open=True
    )
    try:
        first = transport_factory()
        second = transport_factory(queue=first.queue)
        _publish(KeyedPublisher(first, tier=Exclusive()), tenants)
        recorder, consumers, backends = _two_workers_migrate(
            first, second, pooled, lambda conn: int(conn.info.backend_pid)
        )
        assert len(backends) == 1  # one server connection served both workers
        assert all(c.counts.ran > 0 for c in consumers)  # both did take keys
        assert recorder.did_work == tenants
        assert recorder.overlaps() == 0
        # Nothing stays locked on the shared connection once its transactions ended, unlike a
        # session lock, which the next client of the connection would inherit (and re-enter).
        with pooled.connection() as conn:
            held = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s",
                (conn.info.backend_pid,),
            ).fetchone()
            assert held is not None
            assert held[0] == 0
            assert conn.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (True,)
        with pooled.connection() as conn:
            # The control: a session lock taken by "another client" is re-granted here.
            assert conn.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (True,)
            conn.execute("SELECT pg_advisory_unlock_all()")
    finally:
        pooled.close()
    with psycopg.connect(postgres_url, autocommit=True):
        pass


def test_tier_a_behind_a_real_pgbouncer(
    postgres_url: str, pgbouncer_url: str, pgbouncer_factory: Callable[..., PgBouncer]
) -> None:
    """The same through real PgBouncers in transaction pooling mode: the transports go through
    one (no prepared statements, LISTEN on the direct server) and the key locks through a
    second whose pool has ONE server connection, which PgBouncer lends to each lock
    transaction in turn: the transaction-scoped lock never lets two workers hold a key, and
    nothing stays locked on that server connection."""
    tenants = 40
    locks = pgbouncer_factory(pool_size=1)
    pooled = ConnectionPool(
        locks.url,
        min_size=2,
        max_size=2,  # two client connections (one per worker), one server connection
        kwargs={"autocommit": True, "prepare_threshold": None},
        open=True,
    )
    options: dict[str, Any] = {
        "prepared_statements": False,
        "listen_url": postgres_url,
        "min_size": 1,
        "max_size": 4,
    }
    first = PostgresTransport.from_dsn(pgbouncer_url, queue=fresh_queue(), **options)
    second = PostgresTransport.from_dsn(pgbouncer_url, queue=first.queue, **options)
    try:
        _publish(KeyedPublisher(first, tier=Exclusive()), tenants)
        recorder, consumers, servers = _two_workers_migrate(first, second, pooled, _server_pid)
        assert len(servers) == 1  # one server connection served both workers' locks
        assert all(c.counts.ran > 0 for c in consumers)  # both did take keys
        assert recorder.did_work == tenants
        assert recorder.overlaps() == 0
        with psycopg.connect(postgres_url, autocommit=True) as raw:
            held = raw.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s",
                (servers.pop(),),
            ).fetchone()
        assert held == (0,)
    finally:
        pooled.close()
        with PostgresTransport.from_dsn(postgres_url, queue=first.queue, max_size=1) as janitor:
            janitor.purge()
            partition_backend(janitor).purge()
        first.close()
        second.close()


def test_tier_a_under_heavy_contention(transport_factory: Make, backend: str) -> None:
    """Few tenants, slow handlers, many workers: keys really collide, and still never overlap."""
    tenants = 10
    first = transport_factory(max_size=12) if backend == "postgres" else transport_factory()
    _publish(KeyedPublisher(first, tier=Exclusive()), tenants)
    recorder = Recorder()

    def migrate(event: Event, ctx: KeyContext) -> None:
        key = ctx.key
        assert key is not None
        started = recorder.enter(key)
        try:
            time.sleep(0.02)
            recorder.ensure(key)
        finally:
            recorder.exit(key, started)

    consumer = PartitionConsumer(
        first, migrate, tier=Exclusive(), concurrency=8, idle_backoff=(0.01, 0.05)
    )
    report = consumer.run(stop_when_idle=True)
    assert report.acked == tenants * DUPLICATES
    assert consumer.counts.dropped > 0  # the lock was contended...
    assert recorder.overlaps() == 0  # ...and held
    assert recorder.did_work == tenants
