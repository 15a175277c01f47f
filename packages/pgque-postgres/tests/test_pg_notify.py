"""LISTEN/NOTIFY wake-up: an idle worker hears a publish at once instead of polling."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
import pytest

from pgque.core import Event, Worker
from pgque.postgres import PostgresTransport

pytestmark = pytest.mark.timeout(30)


def _later(seconds: float, action: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_first_wait_returns_at_once_then_a_publish_ends_the_wait(
    transport_factory: Callable[..., PostgresTransport],
) -> None:
    consumer = transport_factory()
    producer = transport_factory(queue=consumer.queue)
    assert consumer.wait_for_messages(5.0) is True  # just started listening: claim again
    start = time.monotonic()
    thread = _later(0.2, lambda: producer.publish("g", Event(kind="k")))
    assert consumer.wait_for_messages(10.0) is True
    assert time.monotonic() - start < 5.0
    thread.join()


def test_without_news_the_wait_times_out(
    transport_factory: Callable[..., PostgresTransport],
) -> None:
    consumer = transport_factory()
    other = transport_factory()  # another queue: another channel
    consumer.wait_for_messages(0.1)
    other.publish("g", Event(kind="k"))
    start = time.monotonic()
    assert consumer.wait_for_messages(0.3) is False
    assert time.monotonic() - start >= 0.25


def test_a_transactional_publish_wakes_only_when_it_commits(
    transport_factory: Callable[..., PostgresTransport], postgres_url: str
) -> None:
    consumer = transport_factory()
    producer = transport_factory(queue=consumer.queue)
    consumer.wait_for_messages(0.1)
    with psycopg.connect(postgres_url) as conn:
        producer.publish("g", Event(kind="k"), connection=conn)
        assert consumer.wait_for_messages(0.3) is False
        conn.rollback()
    assert consumer.wait_for_messages(0.3) is False
    with psycopg.connect(postgres_url) as conn:
        producer.publish("g", Event(kind="k"), connection=conn)
        conn.commit()
    assert consumer.wait_for_messages(5.0) is True


def test_nack_without_delay_and_publish_many_wake(
    transport_factory: Callable[..., PostgresTransport],
) -> None:
    consumer = transport_factory()
    producer = transport_factory(queue=consumer.queue)
    consumer.wait_for_messages(0.1)
    producer.publish_many([("a", Event(kind="k")), ("b", Event(kind="k"))])
    assert consumer.wait_for_messages(5.0) is True
    assert consumer.wait_for_messages(0.2) is False  # one batch, one wake-up
    lease = producer.claim()
    assert lease is not None
    assert producer.nack(lease, delay=60.0)
    assert consumer.wait_for_messages(0.3) is False  # parked: nothing claimable yet
    other = producer.claim()
    assert other is not None
    assert producer.nack(other)
    assert consumer.wait_for_messages(5.0) is True


def test_an_injected_connection_falls_back_to_sleeping(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        transport = PostgresTransport(conn, queue="t_notify_injected")
        start = time.monotonic()
        assert transport.wait_for_messages(0.2) is False
        assert time.monotonic() - start >= 0.15


def test_an_idle_worker_handles_a_publish_without_waiting_for_its_poll(
    transport_factory: Callable[..., PostgresTransport],
) -> None:
    consumer = transport_factory()
    producer = transport_factory(queue=consumer.queue)
    handled: list[float] = []
    # An idle poll of 20 s: only a notification can explain a quick pick-up.
    worker = Worker(
        consumer,
        lambda _event: handled.append(time.monotonic()),
        idle_backoff=(20.0, 20.0),
        shutdown_grace=1.0,
    )
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        time.sleep(0.5)  # the worker found the queue empty and waits
        published = time.monotonic()
        producer.publish("g", Event(kind="k"))
        deadline = time.monotonic() + 10.0
        while not handled and time.monotonic() < deadline:
            time.sleep(0.01)
        assert handled, "the publish was not handled"
        assert handled[0] - published < 2.0
    finally:
        worker.stop()
        producer.publish("g", Event(kind="wake"))  # end the worker's wait now, not in 20 s
        runner.join(30)
