"""The per-key gauges of pgque.dashboard.metrics (``pgque_key_*``): the top keys by backlog of
the queues whose transport has fairness keys, over in-memory queues."""

from __future__ import annotations

import dataclasses

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pgque.core import Event, InMemoryTransport, InvalidInput, MemoryStore
from pgque.dashboard.metrics import (
    DEFAULT_TOP_KEYS,
    MAX_TOP_KEYS,
    METRIC_NAMES,
    QueueMetricsCollector,
)

KEY_FAMILIES = (
    "pgque_key_messages",
    "pgque_key_in_flight_groups",
    "pgque_key_oldest_message_age_seconds",
)


def scrape(collector: QueueMetricsCollector) -> dict[str, dict[tuple[str, str], float]]:
    """Each per-key family's samples of one scrape, by (queue, key); and every other family's
    names under ``"families"`` with an empty key."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    found: dict[str, dict[tuple[str, str], float]] = {name: {} for name in KEY_FAMILIES}
    found["families"] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        found["families"][(family.name, "")] = 0.0
        for sample in family.samples:
            if sample.name in KEY_FAMILIES:
                assert set(sample.labels) == {"queue", "key"}
                found[sample.name][(sample.labels["queue"], sample.labels["key"])] = sample.value
            elif sample.name == "pgque_messages":
                found["families"][("pgque_messages", sample.labels["queue"])] = sample.value
    return found


def test_each_key_s_backlog_in_flight_groups_and_oldest_age_are_exported() -> None:
    now = [1_000.0]
    orders = InMemoryTransport(queue="orders", clock=lambda: now[0])
    orders.set_key_policy("acme", max_in_flight=5)
    orders.set_key_policy("idle", weight=2)  # a policy and no group: nothing waiting
    for n in range(3):
        orders.publish(f"acme-{n}", Event(kind="job"), fairness_key="acme")
    now[0] = 1_040.0
    orders.publish("beta-1", Event(kind="job"), fairness_key="beta")
    orders.publish("beta-1", Event(kind="job"), fairness_key="beta")
    now[0] = 1_070.0
    orders.publish("plain", Event(kind="job"))  # the default key, ""
    now[0] = 1_100.0
    leases = orders.claim_many(3, visibility=600)  # one group of each key
    assert {lease.group_id for lease in leases} == {"acme-0", "beta-1", "plain"}

    found = scrape(QueueMetricsCollector(orders))
    assert found["pgque_key_messages"] == {
        ("orders", "acme"): 3,
        ("orders", "beta"): 2,
        ("orders", ""): 1,
        ("orders", "idle"): 0,
    }
    assert found["pgque_key_in_flight_groups"] == {
        ("orders", "acme"): 1,
        ("orders", "beta"): 1,
        ("orders", ""): 1,
        ("orders", "idle"): 0,
    }
    # Ages by the store's clock, as keys() reports them; 0 for a key without messages.
    assert found["pgque_key_oldest_message_age_seconds"] == {
        ("orders", "acme"): 100.0,
        ("orders", "beta"): 60.0,
        ("orders", ""): 30.0,
        ("orders", "idle"): 0.0,
    }


def test_the_top_keys_by_backlog_are_exported_wherever_they_sort() -> None:
    orders = InMemoryTransport(queue="orders")
    # 1,100 keys with one message each: more than one page of keys() (1,000)...
    for n in range(1_100):
        orders.publish(f"g{n:04}", Event(kind="job"), fairness_key=f"k{n:04}")
    # ... and the busiest on both pages: the first in byte order, the middle, the last ones.
    for key, extra in (("k1099", 4), ("k0000", 3), ("k1050", 2), ("k0500", 1)):
        for n in range(extra):
            orders.publish(f"{key}-more-{n}", Event(kind="job"), fairness_key=key)

    top = scrape(QueueMetricsCollector(orders, top_keys=3))["pgque_key_messages"]
    assert top == {("orders", "k1099"): 5, ("orders", "k0000"): 4, ("orders", "k1050"): 3}
    # Equal backlogs: the key first in byte order goes first (k0001, then k0002).
    six = scrape(QueueMetricsCollector(orders, top_keys=6))["pgque_key_messages"]
    assert six == {
        **top,
        ("orders", "k0500"): 2,
        ("orders", "k0001"): 1,
        ("orders", "k0002"): 1,
    }

    default = scrape(QueueMetricsCollector(orders))
    for family in KEY_FAMILIES:
        assert len(default[family]) == DEFAULT_TOP_KEYS == 20
    none = scrape(QueueMetricsCollector(orders, top_keys=0))
    assert all(none[family] == {} for family in KEY_FAMILIES)
    assert none["families"][("pgque_messages", "orders")] == 1_100 + 10


def test_only_queues_whose_transport_has_fairness_keys_get_key_series() -> None:
    class Unfair(InMemoryTransport):
        CAPABILITIES = dataclasses.replace(InMemoryTransport.CAPABILITIES, fairness=False)

    store = MemoryStore()
    fair = InMemoryTransport(store=store, queue="fair")
    fair.publish("g", Event(kind="job"), fairness_key="tenant")
    with InMemoryTransport(store=store, queue="unfair") as setup:
        setup.publish("g", Event(kind="job"), fairness_key="tenant")
    unfair = Unfair(store=store, queue="unfair")
    assert not unfair.capabilities.fairness

    found = scrape(QueueMetricsCollector([fair, unfair]))
    for family in KEY_FAMILIES:
        assert set(found[family]) == {("fair", "tenant")}
    # The other metrics of the queue without fairness keys are there as before.
    assert found["families"][("pgque_messages", "unfair")] == 1
    assert found["families"][("pgque_messages", "fair")] == 1


def test_the_key_families_are_documented_and_top_keys_is_bounded() -> None:
    orders = InMemoryTransport(queue="orders")
    orders.publish("g", Event(kind="job"), fairness_key="tenant")
    families = {name for name, _ in scrape(QueueMetricsCollector(orders))["families"]}
    assert set(KEY_FAMILIES) <= families
    assert families <= set(METRIC_NAMES) | {"pgque_scrape_errors"}
    collector = QueueMetricsCollector(orders, top_keys=MAX_TOP_KEYS)
    assert collector.top_keys == MAX_TOP_KEYS == 100
    for bad in (-1, MAX_TOP_KEYS + 1):
        with pytest.raises(InvalidInput, match="top_keys"):
            QueueMetricsCollector(orders, top_keys=bad)
