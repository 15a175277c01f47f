"""A handler that runs past ``warn_after`` is reported: a WARNING and ``on_stuck`` once per
interval while it runs, counted by MetricsHooks and PrometheusHooks; it goes on and acks."""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

import pytest
from _worker_helpers import KINDS, make_transport, make_worker, run

from pgque.core import Event, InvalidInput, Lease, MemoryStore, MetricsHooks, Worker, WorkerHooks
from pgque.core.worker import CompositeHooks

pytestmark = pytest.mark.timeout(30)

WARN_AFTER = 0.1
#: How many reports the tests wait for before they let the handler finish.
REPORTS = 3


class StuckWatch(MetricsHooks):
    """MetricsHooks that also keeps every report and lets a test wait for the n-th."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[tuple[Lease, float]] = []
        self.changed = threading.Condition()

    def on_stuck(self, lease: Lease, running_s: float) -> None:
        super().on_stuck(lease, running_s)
        with self.changed:
            self.reports.append((lease, running_s))
            self.changed.notify_all()

    def wait_for(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.reports) >= count, timeout=10)


def _run_stuck(kind: str, hooks: WorkerHooks, watch: StuckWatch, while_stuck: Any = None) -> Any:
    """Run a worker whose one handler blocks until *watch* saw REPORTS reports."""
    store = MemoryStore()
    make_transport("sync", store).publish("g", Event(kind="k"))
    release = threading.Event()

    def handler(event: Event) -> None:  # a plain function: the async worker runs it in a thread
        assert release.wait(20)

    worker = make_worker(
        kind, make_transport(kind, store), handler, warn_after=WARN_AFTER, hooks=hooks
    )
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(report=run(worker)))
    thread.start()
    try:
        watch.wait_for(REPORTS)
        if while_stuck is not None:
            while_stuck()
    finally:
        release.set()
        thread.join(20)
    assert not thread.is_alive()
    return outcome["report"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_stuck_handler_is_reported_once_per_interval(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pgque.worker")
    watch = StuckWatch()
    report = _run_stuck(kind, watch, watch)
    assert report.acked == 1  # the handler went on and its message was acked
    lines = [r for r in caplog.records if "handler still running" in r.getMessage()]
    reports = watch.reports
    # The handler was let go after the third report: a fourth may have raced the release.
    assert REPORTS <= len(reports) <= REPORTS + 1
    assert len(lines) == len(reports) == watch.stuck == watch.snapshot()["stuck"]
    for number, ((lease, running_s), line) in enumerate(zip(reports, lines, strict=True), 1):
        assert running_s >= number * WARN_AFTER  # once per interval, never early
        text = line.getMessage()
        assert line.levelno == logging.WARNING
        assert f"message {lease.message_id} of group g (attempt 1)" in text
        assert f"after {running_s:.1f} s (warn_after 0.1s)" in text
        assert line.pgque_group == "g"  # type: ignore[attr-defined]
        assert line.pgque_running_s == running_s  # type: ignore[attr-defined]
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(reports)]
    assert all(gap >= WARN_AFTER * 0.9 for gap in gaps)


def test_prometheus_counts_stuck_reports_and_handlers_stuck_now() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from pgque.dashboard.metrics import PrometheusHooks  # pgque-dashboard

    registry = prometheus_client.CollectorRegistry()
    prom = PrometheusHooks(registry=registry, queue="default")
    watch = StuckWatch()
    gauge_while_stuck: list[float | None] = []

    def sample(name: str) -> float | None:
        value: float | None = registry.get_sample_value(name, {"queue": "default"})
        return value

    report = _run_stuck(
        "sync",
        CompositeHooks([prom, watch]),  # prom first: it has counted when the test wakes
        watch,
        lambda: gauge_while_stuck.append(sample("pgque_worker_stuck_handlers")),
    )
    assert report.acked == 1
    assert gauge_while_stuck == [1.0]  # one handler, counted once however often reported
    assert sample("pgque_worker_stuck_total") == watch.stuck >= REPORTS
    assert sample("pgque_worker_stuck_handlers") == 0.0  # settled: no longer stuck


def test_without_warn_after_nothing_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    queue = make_transport("sync", store)
    queue.publish("g", Event(kind="k"))
    hooks = MetricsHooks()
    done = threading.Event()
    worker = Worker(queue, lambda event: done.wait(0.3), hooks=hooks, idle_backoff=(0.01, 0.05))
    assert worker.options.warn_after is None  # the default: off
    assert run(worker).acked == 1
    assert hooks.stuck == 0
    assert not [r for r in caplog.records if "still running" in r.getMessage()]


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan"), 10**9])
def test_warn_after_is_validated(bad: object) -> None:
    queue = make_transport("sync", MemoryStore())
    with pytest.raises(InvalidInput, match="warn_after"):
        Worker(queue, lambda event: None, warn_after=bad)  # type: ignore[arg-type]


def test_hooks_without_on_stuck_still_work() -> None:
    class Old:  # a duck-typed hooks object written before on_stuck existed
        def on_claimed(self, lease: Lease) -> None:
            pass

        def on_outcome(self, *args: Any) -> None:
            pass

        def on_error(self, *args: Any) -> None:
            pass

    watch = StuckWatch()
    report = _run_stuck("sync", CompositeHooks([Old(), watch]), watch)  # type: ignore[list-item]
    assert report.acked == 1


def test_prometheus_shows_a_thread_that_must_stop_but_cannot_until_it_returns() -> None:
    """Past hard_timeout a handler thread cannot be stopped: the gauge counts it while it
    runs (its lease kept), and drops to 0 once it returned and its message was settled."""
    prometheus_client = pytest.importorskip("prometheus_client")
    from pgque.dashboard.metrics import PrometheusHooks  # pgque-dashboard

    registry = prometheus_client.CollectorRegistry()
    prom = PrometheusHooks(registry=registry, queue="default")
    store = MemoryStore()
    make_transport("sync", store).publish("g", Event(kind="k"))
    gate, reported = threading.Event(), threading.Event()

    class Seen(WorkerHooks):
        def on_unstoppable(self, lease: Lease, running_s: float) -> None:
            reported.set()

    def handler(event: Event) -> None:
        gate.wait(20)

    def sample() -> float | None:
        value: float | None = registry.get_sample_value(
            "pgque_worker_unstoppable_handlers", {"queue": "default"}
        )
        return value

    worker = make_worker(
        "sync",
        make_transport("sync", store),
        handler,
        hard_timeout=0.05,
        hooks=CompositeHooks([prom, Seen()]),
    )
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(run(worker)))
    thread.start()
    try:
        assert reported.wait(10)
        assert sample() == 1.0
    finally:
        gate.set()
        thread.join(20)
    assert result[0].timed_out == 1
    assert sample() == 0.0
