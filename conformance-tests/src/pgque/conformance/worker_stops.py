"""A worker's stop at a forced moment, on a real server: a claim in flight when an immediate
stop lands is given back, a lease that arrives dead is never started, a handler thread past the
stop keeps its group (the races of the worker's own tests on memory).

A backend's test module enables them with ``from pgque.conformance.worker_stops import *``
beside a ``transport_factory`` fixture (``make(**options)``, ``queue=`` for a second transport
of the same queue), as the PostgreSQL and Redis packages do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgque.conformance import process_handlers
from pgque.conformance.cuts import lost_settle_reply
from pgque.conformance.held import held_replies
from pgque.core import Event, MetricsHooks, Worker, WorkerReport

__all__ = [
    "test_leases_a_claim_brings_back_after_an_immediate_stop_are_released",
    "test_a_lease_that_arrives_past_its_visibility_is_never_started",
    "test_a_handler_thread_past_an_immediate_stop_keeps_its_group",
    "test_a_hung_handler_process_is_killed_and_its_group_moves_on",
    "test_an_ack_whose_reply_was_lost_is_confirmed_with_the_store_not_called_lost",
]

Factory = Callable[..., Any]


def _wait_until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.002)


def test_leases_a_claim_brings_back_after_an_immediate_stop_are_released(
    transport_factory: Factory,
) -> None:
    producer = transport_factory()
    for g in range(12):
        producer.publish(f"g{g:02d}", Event(kind="k"))
    held = held_replies(transport_factory(queue=producer.queue))
    tokens: list[str] = []

    def handler(event: Event, lease: Any) -> None:
        tokens.append(lease.token)

    worker = Worker(held, handler, concurrency=4, visibility=600, prefetch=0)
    result: list[WorkerReport] = []
    thread = threading.Thread(
        target=lambda: result.append(worker.run(install_signal_handlers=False))
    )
    thread.start()
    assert held.entered.wait(10)  # leased on the server; the reply is held
    worker.stop(graceful=False)
    _wait_until(lambda: worker._run is None or worker._run.busy == 0, "every slot gave up")
    held.let_through()
    thread.join(15)
    assert not thread.is_alive()
    report = result[0]
    # The held leases never ran and were given back; another call's may have run first.
    assert held.held_leases
    assert not {lease.token for lease in held.held_leases} & set(tokens)
    assert report.released == report.claimed - report.acked >= len(held.held_leases), report
    stats = producer.stats()
    assert (stats.in_flight, stats.messages) == (0, 12 - report.acked)


def test_a_lease_that_arrives_past_its_visibility_is_never_started(
    transport_factory: Factory,
) -> None:
    producer = transport_factory()
    producer.publish("g", Event(kind="k"))
    held = held_replies(transport_factory(queue=producer.queue), delay=1.5)
    tokens: list[str] = []

    def handler(event: Event, lease: Any) -> None:
        tokens.append(lease.token)

    worker = Worker(held, handler, visibility=1.0, prefetch=0, idle_backoff=(0.01, 0.05))
    report = worker.run(stop_when_idle=True, install_signal_handlers=False)
    [dead] = held.held_leases
    assert dead.token not in tokens, tokens  # never started
    assert len(tokens) == 1, tokens  # run once, on a fresh lease
    assert report.acked == 1
    assert producer.stats().messages == 0


def test_a_handler_thread_past_an_immediate_stop_keeps_its_group(
    transport_factory: Factory,
) -> None:
    """The thread cannot be stopped: its lease is kept (nobody else can take the group) until
    it returns, and then its own outcome is settled."""
    producer = transport_factory()
    producer.publish("g", Event(kind="k"))
    gate, started = threading.Event(), threading.Event()

    def handler(event: Event) -> None:
        started.set()
        gate.wait(20)

    hooks = MetricsHooks()
    worker = Worker(transport_factory(queue=producer.queue), handler, hooks=hooks, prefetch=0)
    result: list[WorkerReport] = []
    thread = threading.Thread(
        target=lambda: result.append(worker.run(install_signal_handlers=False))
    )
    thread.start()
    try:
        assert started.wait(10)
        worker.stop(graceful=False)
        _wait_until(lambda: hooks.unstoppable == 1, "the thread was reported")
        assert producer.claim() is None  # the group is still held
        assert producer.stats().in_flight == 1
    finally:
        gate.set()
        thread.join(15)
    assert (result[0].acked, result[0].released, result[0].lost) == (1, 0, 0)
    assert producer.stats().messages == 0


def test_a_hung_handler_process_is_killed_and_its_group_moves_on(
    transport_factory: Factory, tmp_path: Path
) -> None:
    """With ``isolation="process"`` the hard timeout kills the child: the attempt counts
    (max_attempts=1: dead-lettered) and the group's next message runs, in order."""
    producer = transport_factory(max_attempts=1)
    for n in range(2):
        producer.publish("g", Event(kind="k", data={"dir": str(tmp_path), "n": n}))
    worker = Worker(
        transport_factory(queue=producer.queue, max_attempts=1),
        process_handlers.hang_or_ok,
        isolation="process",
        hard_timeout=1.0,
        prefetch=0,
        idle_backoff=(0.01, 0.05),
    )
    report = worker.run(stop_when_idle=True, install_signal_handlers=False)
    starts = process_handlers.marks(tmp_path, "start")
    assert [n for n, _ in starts] == [0, 1], starts
    assert process_handlers.marks(tmp_path, "end") == [starts[1]]
    _wait_until(lambda: not process_handlers.pid_alive(starts[0][1]), "the child was killed")
    assert (report.timed_out, report.acked, report.lost) == (1, 1, 0), report
    [letter] = producer.dead_letters()
    assert letter.error is not None
    assert letter.error.type == "TimeoutError"
    assert producer.stats().messages == 0


def test_an_ack_whose_reply_was_lost_is_confirmed_with_the_store_not_called_lost(
    transport_factory: Factory,
) -> None:
    """The ack ran on the server but its reply was lost; sent again it answers False (the ack
    took the lease). The worker asks the store (``group()``): the message left its group, so
    the ack took effect: counted acked, not lost."""
    producer = transport_factory()
    producer.publish("g", Event(kind="k"))
    transport = lost_settle_reply(transport_factory(queue=producer.queue))
    worker = Worker(transport, lambda event: None, prefetch=0, idle_backoff=(0.01, 0.05))
    report = worker.run(stop_when_idle=True, install_signal_handlers=False)
    assert transport.lost
    assert (report.claimed, report.acked, report.lost) == (1, 1, 0), report
    assert producer.stats().messages == 0
