"""pgque.dashboard.metrics on real PostgreSQL and Redis: values, the top-K, failing backends."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pgque.conformance.servers.restartable import ThrowawayRedis, free_port
from pgque.core import ConfigurationError, Event, InvalidInput, Transport, connect
from pgque.dashboard.metrics import (
    MAX_TOP_K,
    METRIC_NAMES,
    QueueMetricsCollector,
    metrics_asgi_app,
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

BACKENDS = ["postgres", "redis"]


def _parse(text: str) -> Samples:
    """Every sample of an exposition, keyed by (name, sorted labels)."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def scrape(collector: QueueMetricsCollector) -> Samples:
    """Scrape *collector* as Prometheus would (a registry, the text format) and parse it."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return _parse(generate_latest(registry).decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def heads(samples: Samples, queue: str) -> list[tuple[str, str, float]]:
    """The (group, state, age) series of *queue*'s oldest heads, oldest first."""
    found = [
        (dict(labels)["group"], dict(labels)["state"], v)
        for (name, labels), v in samples.items()
        if name == "pgque_group_head_age_seconds" and dict(labels)["queue"] == queue
    ]
    return sorted(found, key=lambda row: -row[2])


def _server_url(request: pytest.FixtureRequest, backend: str) -> str:
    return str(request.getfixturevalue(f"{backend}_url"))


@pytest.fixture(params=BACKENDS)
def queue_url(request: pytest.FixtureRequest) -> str:
    """A URL of a fresh queue that blocks a group after one failed attempt."""
    base = _server_url(request, request.param)
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}queue=metrics-{uuid.uuid4().hex[:10]}&max_attempts=1&on_exhausted=block"


@pytest.fixture
def transport(queue_url: str) -> Iterator[Transport]:
    with connect(queue_url) as opened:
        yield opened


def test_a_scrape_reports_the_queue_after_publishes_claims_blocks_and_dead_letters(
    transport: Transport, queue_url: str
) -> None:
    # Blocked first, alone: a head delivered max_attempts (1) times blocks its group when the
    # next claim reaches it.
    transport.publish("blocked", Event(kind="k", data="blocked"))
    first = transport.claim(visibility=300)
    assert first is not None
    assert transport.nack(first)
    assert transport.claim() is None
    for group in ("leased", "parked", "dead", "paused", "ready"):
        transport.publish(group, Event(kind="k", data=group))
    transport.publish("ready", Event(kind="k", data="second"))
    transport.publish("dead", Event(kind="k", data="second"))
    assert transport.pause("paused")
    leases = {}
    for _ in range(3):
        lease = transport.claim(visibility=300)
        assert lease is not None
        leases[lease.group_id] = lease
    # Claims serve never-served groups in the order they were published.
    assert set(leases) == {"leased", "parked", "dead"}
    assert transport.nack(leases["parked"], delay=600)
    assert transport.dead_letter(leases["dead"], "bad")
    info = transport.group("blocked")
    assert info is not None
    assert info.state == "blocked"

    collector = QueueMetricsCollector(queue_url, [transport.queue])
    try:
        samples = scrape(collector)
    finally:
        collector.close()
    q = transport.queue
    expected = {
        "pgque_up": 1,
        "pgque_scrape_errors_total": 0,
        "pgque_messages": 7,
        "pgque_groups": 6,
        "pgque_in_flight_groups": 1,
        "pgque_parked_groups": 1,
        "pgque_blocked_groups": 1,
        "pgque_paused_groups": 1,
        "pgque_scheduled_messages": 0,
        "pgque_dead_letters": 1,
    }
    assert {name: value(samples, name, queue=q) for name in expected} == expected
    assert 0 < value(samples, "pgque_oldest_message_age_seconds", queue=q) < 60
    assert 500 < value(samples, "pgque_next_resume_seconds", queue=q) <= 600
    listed = heads(samples, q)
    # Every group is listed (6 < top_k) with its state; "dead" now heads its second message.
    assert {(group, state) for group, state, _ in listed} == {
        ("leased", "leased"),
        ("parked", "parked"),
        ("blocked", "blocked"),
        ("dead", "ready"),
        ("paused", "paused"),
        ("ready", "ready"),
    }
    ages = [age for _, _, age in listed]
    assert ages == sorted(ages, reverse=True)
    assert ages[-1] >= 0
    assert listed[-1][0] == "dead"  # its head is the youngest message: published last


def test_the_top_k_is_bounded_and_ordered_by_head_age(transport: Transport) -> None:
    groups = [f"g{i:02}" for i in range(30)]
    for group in groups:  # g00's head is the oldest, g29's the youngest
        transport.publish(group, Event(kind="k"))
    samples = scrape(QueueMetricsCollector(transport, top_k=5))
    listed = heads(samples, transport.queue)
    assert [group for group, _, _ in listed] == groups[:5]
    assert all(state == "ready" for _, state, _ in listed)
    ages = [age for _, _, age in listed]
    assert ages == sorted(ages, reverse=True)
    assert len(set(ages)) == 5

    none = scrape(QueueMetricsCollector(transport, top_k=0))
    assert heads(none, transport.queue) == []


def test_the_top_k_is_exact_whatever_the_id_order_of_the_groups(transport: Transport) -> None:
    """The oldest heads sit anywhere in id order: every state, the last ids included."""
    for i in range(30):
        transport.publish(f"g{29 - i:02}", Event(kind="k"))  # g29's head is the oldest
    transport.publish("zz-held", Event(kind="k"))  # the youngest head, in a paused group
    assert transport.pause("zz-held")
    calls: list[str] = []
    real = transport.groups

    def counted(**kwargs: object) -> object:
        calls.append("groups")
        return real(**kwargs)  # type: ignore[arg-type]

    transport.groups = counted  # type: ignore[method-assign, assignment]
    try:
        samples = scrape(QueueMetricsCollector(transport, top_k=3))
    finally:
        del transport.groups
    q = transport.queue
    assert [group for group, _, _ in heads(samples, q)] == ["g29", "g28", "g27"]
    assert calls == []  # no paging through the groups: one oldest_groups() call
    everything = scrape(QueueMetricsCollector(transport, top_k=31))
    assert heads(everything, q)[-1][:2] == ("zz-held", "paused")
    assert len(heads(everything, q)) == 31


def test_every_queue_the_server_lists_is_exported(request: pytest.FixtureRequest) -> None:
    base = _server_url(request, "postgres")
    tag = uuid.uuid4().hex[:8]
    names = [f"metrics-all-{tag}-a", f"metrics-all-{tag}-b"]
    for name in names:
        with connect(base, queue=name) as one:
            one.publish("g", Event(kind="k"))
    collector = QueueMetricsCollector(base)
    try:
        samples = scrape(collector)
        for name in names:
            assert value(samples, "pgque_up", queue=name) == 1
            assert value(samples, "pgque_messages", queue=name) == 1
        with connect(base, queue=names[0]) as one:
            one.purge()  # type: ignore[attr-defined]
        later = scrape(collector)  # an emptied queue is no longer listed, so not exported
        assert ("pgque_up", (("queue", names[0]),)) not in later
        assert value(later, "pgque_up", queue=names[1]) == 1
    finally:
        collector.close()
        for name in names:
            with connect(base, queue=name) as one:
                one.purge()  # type: ignore[attr-defined]


def test_a_queue_whose_backend_goes_down_reports_up_0_and_the_scrape_still_answers(
    request: pytest.FixtureRequest,
) -> None:
    live_url = _server_url(request, "postgres")
    server = ThrowawayRedis()
    server.start()
    try:
        with (
            connect(live_url, queue=f"metrics-live-{uuid.uuid4().hex[:8]}") as live,
            connect(f"{server.url}?queue=metrics-flaky&retries=0") as flaky,
        ):
            live.publish("g", Event(kind="k"))
            flaky.publish("g", Event(kind="k"))
            collector = QueueMetricsCollector([live, flaky])
            before = scrape(collector)
            assert value(before, "pgque_up", queue="metrics-flaky") == 1
            assert value(before, "pgque_messages", queue="metrics-flaky") == 1
            server.down()
            during = scrape(collector)
            assert value(during, "pgque_up", queue="metrics-flaky") == 0
            assert value(during, "pgque_scrape_errors_total", queue="metrics-flaky") == 1
            assert ("pgque_messages", (("queue", "metrics-flaky"),)) not in during
            assert value(during, "pgque_up", queue=live.queue) == 1
            assert value(during, "pgque_messages", queue=live.queue) == 1
            server.up()
            after = scrape(collector)
            assert value(after, "pgque_up", queue="metrics-flaky") == 1
            assert value(after, "pgque_scrape_errors_total", queue="metrics-flaky") == 1
            assert value(after, "pgque_messages", queue="metrics-flaky") == 1
    finally:
        server.stop()


def test_a_url_nothing_listens_on_reports_up_0(request: pytest.FixtureRequest) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/x"
    collector = QueueMetricsCollector(
        url, ["orders"], connect_options={"retry_refused": False, "timeout": 1}
    )
    for attempt in (1, 2):
        samples = scrape(collector)
        assert value(samples, "pgque_up", queue="orders") == 0
        assert value(samples, "pgque_scrape_errors_total", queue="orders") == attempt
    listing = QueueMetricsCollector(url, connect_options={"retry_refused": False, "timeout": 1})
    for attempt in (1, 2):
        samples = scrape(listing)  # listing the queues failed: one error a scrape, no retry
        assert value(samples, "pgque_up", queue="default") == 0
        assert value(samples, "pgque_scrape_errors_total", queue="default") == attempt


def test_every_exposed_family_is_documented_in_metric_names(transport: Transport) -> None:
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease, delay=60)
    names = {name for name, _ in scrape(QueueMetricsCollector(transport))}
    documented = set(METRIC_NAMES) | {"pgque_scrape_errors_total"}
    assert names <= documented
    # Every documented family shows up when it has something to say (next_due needs a
    # scheduled message, which not every backend has; the per-key gauges a backend with
    # fairness keys, where the default key of the group above has one; the worker gauges a
    # backend with live workers, which counts zero workers).
    unsaid = {"pgque_scrape_errors", "pgque_next_due_seconds"}
    if not transport.capabilities.fairness:
        unsaid |= {name for name in METRIC_NAMES if name.startswith("pgque_key_")}
    # The live-worker gauges need a backend that keeps live workers.
    if not transport.capabilities.workers:
        unsaid |= {name for name in METRIC_NAMES if "worker" in name}
    assert documented - names <= unsaid


def test_out_of_range_arguments_are_refused() -> None:
    with pytest.raises(InvalidInput, match="top_k"):
        QueueMetricsCollector("memory://", top_k=MAX_TOP_K + 1)
    with pytest.raises(InvalidInput, match="top_k"):
        QueueMetricsCollector("memory://", top_k=-1)
    with connect("memory://") as memory, pytest.raises(ConfigurationError, match="queues="):
        QueueMetricsCollector(memory, ["other"])


def test_the_asgi_app_serves_the_collector(transport: Transport) -> None:
    transport.publish("g", Event(kind="k"))
    app = metrics_asgi_app(QueueMetricsCollector(transport))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 200
    assert (b"content-type", b"text/plain; version=1.0.0; charset=utf-8") in sent[0][
        "headers"
    ] or any(k == b"content-type" and v.startswith(b"text/plain") for k, v in sent[0]["headers"])
    samples = _parse(sent[1]["body"].decode())
    assert value(samples, "pgque_messages", queue=transport.queue) == 1


def test_max_age_answers_from_the_last_reading(transport: Transport) -> None:
    transport.publish("a", Event(kind="k"))
    cached = QueueMetricsCollector(transport, max_age=600)
    fresh = QueueMetricsCollector(transport)
    assert value(scrape(cached), "pgque_messages", queue=transport.queue) == 1
    transport.publish("b", Event(kind="k"))
    assert value(scrape(cached), "pgque_messages", queue=transport.queue) == 1
    assert value(scrape(fresh), "pgque_messages", queue=transport.queue) == 2
    with pytest.raises(InvalidInput, match="max_age"):
        QueueMetricsCollector(transport, max_age=-1)
