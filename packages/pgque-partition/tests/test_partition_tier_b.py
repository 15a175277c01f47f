"""Tier B (Ordered): N tenants x 20 lifecycle events, 8 workers, one group per key and 16
slots: every tenant's events handled in publish order, one at a time. Reports events/s and,
on PostgreSQL, rows read per event delivered (pg_stat_user_tables deltas in a database of the
test's own, so nobody else's reads count).

CI size: 100 tenants; ``--partition-full``: the issue's 500 tenants (10,000 events).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from _partition_support import Make, Recorder
from psycopg import sql

from pgque.core import Transport
from pgque.core.models import Event
from pgque.partition import KeyContext, KeyedPublisher, Ordered, PartitionConsumer
from pgque.postgres import PostgresTransport

EVENTS_PER_TENANT = 20
WORKERS = 8
KINDS = ("FileCreated", "FileOverwritten", "FileDeleted")

_READS = """
SELECT relname, COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)
  FROM pg_stat_user_tables WHERE schemaname = 'pgque_fifo'
"""


@pytest.fixture
def own_database(postgres_url: str) -> Iterator[str]:
    """Return the URL of a new database (dropped afterwards), for clean table statistics."""
    name = f"pgque_p_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(postgres_url)
    yield urlunsplit(parts._replace(path=f"/{name}"))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _rows_read(url: str) -> dict[str, int]:
    """Return rows read (sequential + index fetches) per pgque table of *url*'s database."""
    # Every other backend has exited (transports closed), so their statistics are flushed.
    time.sleep(0.3)
    with psycopg.connect(url, autocommit=True) as conn:
        return {str(name): int(n) for name, n in conn.execute(_READS).fetchall()}


def _run(transports: list[Transport], tier: Ordered, recorder: Recorder, total: int) -> float:
    """Run the consumers until *total* events were handled, then stop them (gracefully: the
    last acks go out). Not ``stop_when_idle``: its checks read every message of the queue
    (``stats()``), as often as claims come back empty, which depends on how busy the machine
    is; the rows read per event must not."""

    def handle(event: Event, ctx: KeyContext) -> None:
        key = ctx.key
        assert key is not None
        started = recorder.enter(key)
        try:
            with recorder.lock:
                recorder.order[key].append(int(event.data["seq"]))  # type: ignore[arg-type,call-overload,index]
        finally:
            recorder.exit(key, started)

    consumers = [
        PartitionConsumer(
            t, handle, tier=tier, concurrency=WORKERS // len(transports), idle_backoff=(0.01, 0.1)
        )
        for t in transports
    ]
    started = time.monotonic()
    threads = [threading.Thread(target=c.run) for c in consumers]
    for thread in threads:
        thread.start()
    deadline = started + 600
    while sum(len(seqs) for seqs in list(recorder.order.values())) < total:
        assert time.monotonic() < deadline, "the consumers did not handle every event"
        time.sleep(0.01)
    for consumer in consumers:
        consumer.stop()
    for thread in threads:
        thread.join(timeout=60)
    return time.monotonic() - started


def _publish(publisher: KeyedPublisher, tenants: int) -> None:
    for seq in range(EVENTS_PER_TENANT):
        for tenant in range(tenants):
            publisher.send(
                KINDS[seq % 3], {"tenant": tenant, "seq": seq}, partition_key=f"tenant:{tenant}"
            )


def _check(recorder: Recorder, tenants: int) -> None:
    assert len(recorder.order) == tenants
    for key, seqs in recorder.order.items():
        assert seqs == list(range(EVENTS_PER_TENANT)), key
    assert recorder.overlaps() == 0
    assert max(recorder.max_active.values()) == 1


@pytest.mark.parametrize("slots", [None, 16], ids=["per-key", "slots16"])
def test_tier_b_order_per_tenant(
    transport_factory: Make, backend: str, slots: int | None, full: bool, request: Any
) -> None:
    tenants = 500 if full else 100
    events = tenants * EVENTS_PER_TENANT
    tier = Ordered(slots=slots)
    if backend == "postgres":
        url = request.getfixturevalue("own_database")
        opened: list[Transport] = [PostgresTransport.from_dsn(url, queue="lifecycle", max_size=8)]
    else:
        opened = [transport_factory()]
    try:
        _publish(KeyedPublisher(opened[0], tier=tier), tenants)
        if backend == "postgres":
            opened[0].close()
            before = _rows_read(url)
            opened = [
                PostgresTransport.from_dsn(url, queue="lifecycle", max_size=8) for _ in range(2)
            ]
        else:
            opened.append(transport_factory(queue=opened[0].queue))
        recorder = Recorder()
        elapsed = _run(opened, tier, recorder, events)
        assert opened[0].stats().messages == 0
    finally:
        for transport in opened:
            transport.close()
    line = (
        f"\n[tier B] backend={backend} slots={slots} tenants={tenants} events={events} "
        f"workers={WORKERS}: {events / elapsed:.0f} events/s"
    )
    if backend == "postgres":
        after = _rows_read(url)
        reads = {name: after[name] - before.get(name, 0) for name in after}
        total = sum(reads.values())
        line += (
            f"; rows read per event delivered: {total / events:.2f} in all "
            f"(messages {reads.get('messages', 0) / events:.2f}, "
            f"groups {reads.get('groups', 0) / events:.2f}); "
            f"a log scanned once per slot reads {slots or 1} stream rows per event"
        )
        # Reading stays a constant per event: it does not grow with the slot count.
        assert total / events < 30
        assert reads.get("messages", 0) / events < 8
    print(line)
    _check(recorder, tenants)
