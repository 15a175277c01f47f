"""The live-worker gauges: alive and gone workers, slots and busy slots of the alive ones, and
the leases gone workers still hold; absent on a backend that does not keep live workers."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pgque.core import Event, InMemoryTransport, MemoryStore, SlotBeat, WorkerBeat
from pgque.dashboard.metrics import QueueMetricsCollector
from pgque.sharding import ShardedTransport


def _scrape(transport: object) -> dict[str, float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueMetricsCollector(transport))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith(("pgque_worker", "pgque_gone_worker"))
    }


def test_the_gauges_count_alive_and_gone_workers_their_slots_and_held_leases() -> None:
    now = [1_000_000.0]
    transport = InMemoryTransport(queue="orders", clock=lambda: now[0])
    for group in ("a", "b", "c"):
        transport.publish(group, Event(kind="k"))
    first = transport.claim(600.0, holder="dead:1:0")
    second = transport.claim(600.0, holder="dead:1:1")
    assert first is not None
    assert second is not None
    transport.heartbeat(WorkerBeat("dead", "dead:1", "dead", 1, "v", 2, 1.0))
    now[0] += 10.0  # "dead" stops heartbeating: gone, holding two leases
    busy = (SlotBeat(0, "c", 3, 1.0), SlotBeat(2, "x", 9, 0.0))
    transport.heartbeat(WorkerBeat("live-1", "live:2", "live", 2, "v", 4, 10.0, busy))
    transport.heartbeat(WorkerBeat("live-2", "live:3", "live", 3, "v", 8, 10.0))
    assert _scrape(transport) == {
        "pgque_workers_alive": 2.0,
        "pgque_workers_gone": 1.0,
        "pgque_worker_slots": 12.0,
        "pgque_worker_slots_busy": 2.0,
        "pgque_gone_worker_leases": 2.0,
    }


def test_a_backend_without_live_workers_has_no_worker_gauges() -> None:
    store = MemoryStore()
    shards = [InMemoryTransport(store=store, queue=f"s{k}") for k in range(2)]
    assert _scrape(ShardedTransport(shards, queue="orders")) == {}
