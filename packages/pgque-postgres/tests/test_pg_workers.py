"""Live workers on PostgreSQL: a real worker registers, its heartbeat shows the slot that runs a
message (server time) and the lease held in its name, and its goodbye removes its row; a
worker silent past the prune age is removed by another worker's heartbeat."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from pgque.core import Event, SlotBeat, Worker, WorkerBeat
from pgque.core.live_workers import PRUNE_AFTER_S
from pgque.core.worker._names import holder_prefix
from pgque.postgres import PostgresTransport

pytestmark = pytest.mark.timeout(60)


def _until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_worker_on_postgres_heartbeats_its_slot_and_says_goodbye(
    transport_factory: Callable[..., PostgresTransport],
) -> None:
    transport = transport_factory()
    message_id = transport.publish("order-42", Event(kind="k", data=1))
    release = threading.Event()
    worker = Worker(
        transport, lambda event: release.wait(20), heartbeat_every=0.1, name="pg-worker"
    )
    thread = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    thread.start()
    try:

        def busy() -> bool:
            listed = transport.workers()
            return len(listed) == 1 and listed[0].slots_busy == 1

        _until(busy)
        [info] = transport.workers()
        assert (info.id, info.holder, info.alive) == ("pg-worker", holder_prefix(), True)
        assert [(s.group_id, s.message_id) for s in info.slots] == [("order-42", message_id)]
        assert [(x.group_id, x.message_id) for x in info.leases] == [("order-42", message_id)]
        assert info.leases[0].expires_at > info.last_heartbeat
    finally:
        release.set()
        worker.stop()
        thread.join(20)
    assert not thread.is_alive()
    assert transport.workers() == []


def test_a_silent_row_is_pruned_by_the_next_heartbeat_on_the_server_clock(
    transport_factory: Callable[..., PostgresTransport],
) -> None:
    clock = [1_000_000.0]
    transport = transport_factory(clock=lambda: clock[0])

    def beat(worker: str) -> WorkerBeat:
        return WorkerBeat(worker, "h:1", "h", 1, "v", 1, 1.0, (SlotBeat(0, "g", 1, 0.5),))

    transport.heartbeat(beat("old"))
    clock[0] += PRUNE_AFTER_S + 1.0
    transport.heartbeat(beat("new"))
    [info] = transport.workers()
    assert info.id == "new"
    assert info.slots[0].since == pytest.approx(clock[0] - 0.5)
