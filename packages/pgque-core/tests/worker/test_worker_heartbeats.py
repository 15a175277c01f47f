"""The worker registers on a transport that keeps live workers, heartbeats with what each busy
slot holds, and says goodbye when its run returns; a transport without the ability is not
asked. The handler blocks on an event, so what a heartbeat reports is known, not raced."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from pgque.core import (
    AsyncInMemoryTransport,
    AsyncWorker,
    ConnectionLost,
    Event,
    InMemoryTransport,
    InvalidInput,
    MemoryStore,
    Worker,
    WorkerBeat,
    WorkerInfo,
    WorkerReport,
)
from pgque.core.worker._names import holder_prefix
from pgque.sharding import ShardedTransport

pytestmark = pytest.mark.timeout(30)


def _until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _busy(transport: InMemoryTransport, count: int) -> Callable[[], bool]:
    def check() -> bool:
        listed = transport.workers()
        return len(listed) == 1 and listed[0].slots_busy == count

    return check


def test_a_worker_heartbeats_its_busy_slots_and_says_goodbye() -> None:
    transport = InMemoryTransport(queue="hb")
    message_id = transport.publish("order-42", Event(kind="k", data=1))
    release = threading.Event()
    worker = Worker(
        transport,
        lambda event: release.wait(10),
        concurrency=3,
        heartbeat_every=0.1,
        name="billing-1",
    )
    thread = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    thread.start()
    try:
        _until(_busy(transport, 1))
        [info] = transport.workers()
        assert (info.id, info.holder, info.concurrency, info.alive) == (
            "billing-1",
            holder_prefix(),
            3,
            True,
        )
        [slot] = info.slots
        assert (slot.group_id, slot.message_id) == ("order-42", message_id)
        assert slot.since <= info.last_heartbeat
        assert [(x.group_id, x.message_id) for x in info.leases] == [("order-42", message_id)]
        assert info.leases[0].holder == f"{holder_prefix()}:{slot.slot}"
        release.set()
        _until(_busy(transport, 0))
    finally:
        release.set()
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert transport.workers() == []


@pytest.mark.asyncio
async def test_an_async_worker_heartbeats_and_says_goodbye() -> None:
    transport = AsyncInMemoryTransport(queue="hb")
    await transport.publish("g", Event(kind="k", data=1))
    started = asyncio.Event()
    release = asyncio.Event()

    async def handler(event: Event) -> None:
        started.set()
        await release.wait()

    worker = AsyncWorker(transport, handler, heartbeat_every=0.1, name="async-1")
    run = asyncio.ensure_future(worker.run(install_signal_handlers=False))
    await asyncio.wait_for(started.wait(), 10)
    listed: list[WorkerInfo] = []
    for _ in range(500):
        listed = await transport.workers()
        if listed and listed[0].slots_busy == 1:
            break
        await asyncio.sleep(0.01)
    assert [(w.id, w.slots_busy, w.slots[0].group_id) for w in listed] == [("async-1", 1, "g")]
    release.set()
    worker.stop()
    await asyncio.wait_for(run, 10)
    assert await transport.workers() == []


class _FailingHeartbeats(InMemoryTransport):
    """Its first two heartbeats fail as a lost connection would."""

    failures = 2

    def heartbeat(self, beat: WorkerBeat) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionLost("the server went away (injected into heartbeat)")
        super().heartbeat(beat)


def test_a_failed_heartbeat_is_counted_and_the_worker_goes_on() -> None:
    transport = _FailingHeartbeats(queue="hb")
    transport.publish("g", Event(kind="k", data=1))
    release = threading.Event()
    worker = Worker(transport, lambda event: release.wait(10), heartbeat_every=0.1)
    reports: list[WorkerReport] = []
    thread = threading.Thread(
        target=lambda: reports.append(worker.run(install_signal_handlers=False))
    )
    thread.start()
    try:
        _until(_busy(transport, 1))  # registered by the third heartbeat
        assert transport.failures == 0
    finally:
        release.set()
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    [report] = reports
    assert (report.acked, report.errors) == (1, 2)
    assert transport.workers() == []


def test_a_transport_without_live_workers_is_not_asked() -> None:
    store = MemoryStore()
    shards = [InMemoryTransport(store=store, queue=f"hb_s{k}") for k in range(2)]
    transport = ShardedTransport(shards, queue="hb")
    assert not transport.capabilities.workers
    transport.publish("g", Event(kind="k", data=1))
    report = Worker(transport, lambda event: None, heartbeat_every=0.1).run(
        stop_when_idle=True, install_signal_handlers=False
    )
    assert report.acked == 1
    assert report.errors == 0
    assert all(shard.workers() == [] for shard in shards)


@pytest.mark.parametrize("every", [0, 0.05, 601, float("nan"), True, "10"])
def test_heartbeat_every_is_bounded(every: object) -> None:
    with pytest.raises(InvalidInput):
        Worker(InMemoryTransport(), lambda event: None, heartbeat_every=every)  # type: ignore[arg-type]
