"""Metrics hooks, the Prometheus exporter and what the worker logs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _worker_helpers import KINDS, run_handler

from pgque.core import (
    CompositeHooks,
    Event,
    InMemoryTransport,
    Lease,
    MemoryStore,
    MetricsHooks,
    Outcome,
    Reject,
    RetryPolicy,
    WorkerHooks,
)

pytestmark = pytest.mark.timeout(30)

SECRET = "s3cr3t-card-4111"


def _mixed(store: MemoryStore) -> InMemoryTransport:
    queue = InMemoryTransport(store=store)
    queue.publish("ok", Event(kind="k", data={"card": SECRET}, headers={"auth": SECRET}))
    queue.publish("flaky", Event(kind="k", data={"card": SECRET}))
    queue.publish("bad", Event(kind="k", data={"card": SECRET}))
    return queue


def _mixed_handler(event: Event, lease: Lease) -> None:
    if lease.group_id == "flaky" and lease.attempt == 1:
        raise ValueError("flaky downstream")
    if lease.group_id == "bad":
        raise Reject("bad input")


FAST = RetryPolicy(base=0.01, jitter=0.0)


@pytest.mark.parametrize("kind", KINDS)
def test_metrics_hooks_count_and_time_each_outcome(kind: str) -> None:
    store = MemoryStore()
    _mixed(store)
    hooks = MetricsHooks()
    report = run_handler(kind, store, _mixed_handler, hooks=hooks, retry=FAST)
    assert hooks.claimed == report.claimed == 4
    assert hooks.count(Outcome.ACKED) == report.acked == 2
    assert hooks.count("retried") == report.retried == 1
    assert hooks.count(Outcome.DEAD_LETTERED) == report.dead_lettered == 1
    timing = hooks.timing(Outcome.ACKED)
    assert timing.count == 2
    assert 0 <= timing.min_s <= timing.mean_s <= timing.max_s < 1.0
    snapshot: Any = hooks.snapshot()
    assert snapshot["outcomes"]["acked"] == 2
    assert snapshot["timings"]["dead_lettered"]["count"] == 1
    assert report.as_dict()["acked"] == 2
    assert report.counts[Outcome.RETRIED] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_failing_hooks_never_stop_the_worker(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(WorkerHooks):
        def on_claimed(self, lease: Lease) -> None:
            raise RuntimeError("hook bug")

        def on_outcome(self, outcome: Outcome, duration_s: float, lease: Lease) -> None:
            raise RuntimeError("hook bug")

    store = MemoryStore()
    _mixed(store)
    counted = MetricsHooks()
    hooks = CompositeHooks([counted, Broken()])
    report = run_handler(kind, store, _mixed_handler, hooks=hooks, retry=FAST)
    assert report.settled == 4
    assert counted.count(Outcome.ACKED) == 2
    assert any("hook on_claimed failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("kind", KINDS)
def test_logs_name_messages_but_never_their_data(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    _mixed(store)
    caplog.set_level(logging.DEBUG, logger="pgque.worker")
    run_handler(kind, store, _mixed_handler, retry=FAST, name="w-test")
    records = [r for r in caplog.records if r.name == "pgque.worker"]
    assert records
    text = "\n".join(caplog.text.splitlines() + [str(vars(r)) for r in records])
    assert SECRET not in text
    failed = [r for r in records if "handler failed" in r.getMessage()]
    assert len(failed) == 1
    assert failed[0].levelno == logging.WARNING
    assert vars(failed[0])["pgque_attempt"] == 1
    assert vars(failed[0])["pgque_group"] == "flaky"
    assert any("rejected message" in r.getMessage() for r in records)
    assert any("w-test started" in r.getMessage() for r in records)


def test_prometheus_hooks_export_counters_and_durations() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from pgque.dashboard.metrics import PrometheusHooks  # pgque-dashboard

    registry = prometheus_client.CollectorRegistry()
    store = MemoryStore()
    _mixed(store)
    hooks = PrometheusHooks(registry=registry, queue="default")
    again = PrometheusHooks(registry=registry, queue="default")  # shares the families
    run_handler("sync", store, _mixed_handler, hooks=CompositeHooks([hooks]), retry=FAST)
    run_handler("async", MemoryStore(), _mixed_handler, hooks=again, retry=FAST)

    def value(name: str, **labels: str) -> float | None:
        result: float | None = registry.get_sample_value(name, labels)
        return result

    assert value("pgque_worker_claimed_total", queue="default") == 4
    assert value("pgque_worker_messages_total", queue="default", outcome="acked") == 2
    assert value("pgque_worker_messages_total", queue="default", outcome="retried") == 1
    assert value("pgque_worker_handler_seconds_count", queue="default", outcome="acked") == 2
    hooks.on_error(ConnectionError("down"), None)
    assert value("pgque_worker_errors_total", queue="default", error="ConnectionError") == 1
    exposition = prometheus_client.generate_latest(registry).decode()
    assert SECRET not in exposition
    assert "flaky" not in exposition  # group ids are not labels
