"""Races of the per-group row design: publish against a draining ack, and a stress run.

The seed's publish inserted the message, then the group row with ``ON CONFLICT DO NOTHING``,
taking no lock: an ack draining the group at that moment deleted the row and the message was
orphaned (no group row, so no claim ever finds it). pgque's publish holds the group row
``FOR KEY SHARE`` until it commits, and a drain only deletes a row nobody holds.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from pgque.core import Event
from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]

#: The seed's publish, kept here only to show the race it loses (two statements, no lock).
SEED_INSERT_MESSAGE = (
    "INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at) "
    "VALUES (%s, %s, %s, extract(epoch FROM clock_timestamp()))"
)
SEED_INSERT_GROUP = (
    "INSERT INTO pgque_fifo.groups (queue, group_id, priority) VALUES (%s, %s, 0) "
    "ON CONFLICT (queue, group_id) DO NOTHING"
)


def seed_publish(conn: psycopg.Connection[tuple[object, ...]], queue: str, event: Event) -> None:
    conn.execute(SEED_INSERT_MESSAGE, (queue, "g", event.to_json()))
    conn.execute(SEED_INSERT_GROUP, (queue, "g"))


def pgque_publish(
    conn: psycopg.Connection[tuple[object, ...]], transport: PostgresTransport, event: Event
) -> None:
    transport.publish("g", event, connection=conn)


def _publish_while_ack_drains(
    transport_factory: Make, postgres_url: str, flavour: str
) -> tuple[PostgresTransport, Event]:
    """Publish into a leased group in an open transaction, let the ack drain it, commit."""
    transport = transport_factory()
    transport.publish("g", Event(kind="first"))
    lease = transport.claim()
    assert lease is not None
    second = Event(kind="second")
    with psycopg.connect(postgres_url) as conn:  # not autocommit: an open transaction
        if flavour == "seed":
            seed_publish(conn, transport.queue, second)
        else:
            pgque_publish(conn, transport, second)
        # The ack runs while the publish is uncommitted; it must not wait for it either way.
        assert transport.ack(lease)
        conn.commit()
    return transport, second


def test_seed_publish_orphans_a_message_when_an_ack_drains_the_group(
    transport_factory: Make, postgres_url: str
) -> None:
    # The seed's version fails: the message is stored but no group row leads to it.
    transport, _second = _publish_while_ack_drains(transport_factory, postgres_url, "seed")
    stats = transport.stats()
    assert (stats.messages, stats.groups) == (1, 0)
    assert transport.claim() is None


def test_publish_during_a_draining_ack_keeps_the_message_deliverable(
    transport_factory: Make, postgres_url: str
) -> None:
    transport, second = _publish_while_ack_drains(transport_factory, postgres_url, "pgque")
    lease = transport.claim()
    assert lease is not None
    assert lease.event == second
    assert transport.ack(lease)
    assert transport.stats().groups == 0


def test_publish_waits_for_an_uncommitted_drain_then_recreates_the_group(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    transport.publish("g", Event(kind="first"))
    lease = transport.claim()
    assert lease is not None
    second = Event(kind="second")
    with psycopg.connect(postgres_url) as conn, ThreadPoolExecutor(1) as pool:
        acker = PostgresTransport(conn, queue=transport.queue, setup=False)
        with conn.transaction():
            assert acker.ack(lease)  # drained: the group row is deleted, not yet committed
            pending = pool.submit(transport.publish, "g", second)
            time.sleep(0.3)
            assert not pending.done()  # the publish waits on the deleted row's lock
        pending.result(timeout=10)
    again = transport.claim()
    assert again is not None
    assert again.event == second


@pytest.mark.stress
def test_stress_publishers_and_draining_consumers_deliver_exactly_once(
    transport_factory: Make,
) -> None:
    """8 threads for PGQUE_STRESS_SECONDS (default 10): every message delivered once, in order."""
    seconds = float(os.environ.get("PGQUE_STRESS_SECONDS", "10"))
    transport = transport_factory(max_size=8)
    groups = [f"g{i}" for i in range(4)]
    published: list[int] = []
    delivered: dict[str, list[int]] = defaultdict(list)
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def publisher(index: int) -> None:
        n = 0
        while not stop.is_set():
            group = groups[(index + n) % len(groups)]
            message_id = transport.publish(group, Event(kind="e", data={"n": n}))
            with lock:
                published.append(message_id)
            n += 1
            # Keep the backlog tiny so groups drain all the time: that is the race window.
            while not stop.is_set():
                with lock:
                    backlog = len(published) - sum(len(ids) for ids in delivered.values())
                if backlog < 4:
                    break
                time.sleep(0.0005)

    def consumer(deadline_extra: float) -> None:
        idle_since: float | None = None
        while True:
            lease = transport.claim(visibility=60)
            if lease is None:
                if stop.is_set():
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > deadline_extra:
                        return
                time.sleep(0.001)
                continue
            idle_since = None
            with lock:
                delivered[lease.group_id].append(lease.message_id)
            assert transport.ack(lease)

    def guard(target: Callable[..., None], *args: object) -> Callable[[], None]:
        def run() -> None:
            try:
                target(*args)
            except BaseException as exc:  # surfaced below
                errors.append(exc)
                stop.set()

        return run

    threads = [threading.Thread(target=guard(publisher, i)) for i in range(4)]
    threads += [threading.Thread(target=guard(consumer, 0.5)) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    everything = [m for ids in delivered.values() for m in ids]
    assert len(published) > 100
    assert sorted(everything) == sorted(published)  # exactly once: none lost, none twice
    for ids in delivered.values():
        assert ids == sorted(ids)  # FIFO per group
    stats = transport.stats()
    assert (stats.messages, stats.groups) == (0, 0)
