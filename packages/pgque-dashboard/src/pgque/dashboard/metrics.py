"""pgque's Prometheus metrics, the one module for them: the queues' and the workers'.

**Queue metrics**, read at scrape time::

    from prometheus_client import CollectorRegistry, generate_latest
    from pgque.dashboard.metrics import QueueMetricsCollector

    registry = CollectorRegistry()
    registry.register(QueueMetricsCollector("postgresql://localhost/app"))
    print(generate_latest(registry).decode())

:class:`QueueMetricsCollector` reads every queue's :meth:`~pgque.core.Transport.stats` when
Prometheus scrapes (nothing is polled in between), and the *top_k* groups whose heads have
waited longest, exactly (:meth:`~pgque.core.Transport.oldest_groups`, an index on every
backend); on a transport with fairness keys (``Capabilities.fairness``), the *top_keys* keys
with the largest backlog too (:meth:`~pgque.core.SupportsFairness.keys`). A queue whose
backend fails answers ``pgque_up 0`` and the scrape goes on. On a transport that keeps live
workers (``Capabilities.workers``; docs/workers.md), one
:meth:`~pgque.core.SupportsWorkers.workers` call per queue gives the ``pgque_workers_*``,
``pgque_worker_slots*`` and ``pgque_gone_worker_leases`` gauges. :func:`metrics_asgi_app` mounts
the same metrics in an ASGI application; ``pgque metrics`` serves them over HTTP. Metric
names are listed in :data:`METRIC_NAMES`.

Labels are ``queue`` on every metric, plus ``group`` and ``state`` on
``pgque_group_head_age_seconds``, which has at most *top_k* series per queue (and *top_k* is at
most :data:`MAX_TOP_K`), and ``key`` on the ``pgque_key_*`` gauges, which have at most
*top_keys* series per queue (at most :data:`MAX_TOP_KEYS`), so the number of series stays
bounded whatever the number of groups and keys. ``key`` is the fairness key as stored: ``""``
for the groups published without one, the default key (Prometheus stores that series without
a ``key`` label; ``{key=""}`` selects it).

**Worker metrics**, counted as a worker runs (``pgque worker --prometheus-port PORT`` serves
them through :func:`serve_worker_metrics`)::

    from pgque.core import Worker, connect
    from pgque.dashboard.metrics import PrometheusHooks, serve

    serve(9108)  # http://127.0.0.1:9108/metrics
    Worker(connect(url), handler, hooks=PrometheusHooks()).run()

Worker metrics (``namespace`` defaults to ``pgque``), labelled by ``queue``:

- ``pgque_worker_claimed_total``: messages claimed;
- ``pgque_worker_messages_total{outcome}``: messages settled, by :class:`~pgque.core.Outcome`;
- ``pgque_worker_handler_seconds{outcome}``: a histogram of handler-to-settle durations;
- ``pgque_worker_errors_total{error}``: transport errors the worker met and survived;
- ``pgque_worker_stuck_total``: reports of a handler running past the worker's
  ``warn_after`` (one when it crosses it, one more per ``warn_after`` while it runs);
- ``pgque_worker_stuck_handlers``: a gauge of the handlers running past ``warn_after`` now;
- ``pgque_worker_unstoppable_handlers``: a gauge of the handlers that had to stop but run on
  in their thread, their groups held until they return.

Labels carry queue names, outcomes and exception class names only: never group ids or data.
The worker's own counters, without Prometheus, are :class:`pgque.core.MetricsHooks` (core).
"""

from __future__ import annotations

import asyncio
import heapq
import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pgque.core.contract import SupportsFairness, SupportsQueues, SupportsWorkers, Transport
from pgque.core.errors import ConfigurationError, InvalidInput, PgqueError
from pgque.core.models import GroupInfo, KeyInfo, Lease, QueueStats, WorkerInfo
from pgque.core.registry import connect
from pgque.core.urls import parse_url
from pgque.core.validation import MAX_GROUPS_PAGE
from pgque.core.worker import Outcome, WorkerHooks

__all__ = [
    # the queues'
    "QueueMetricsCollector",
    "metrics_asgi_app",
    "METRIC_NAMES",
    "DEFAULT_TOP_K",
    "MAX_TOP_K",
    "DEFAULT_TOP_KEYS",
    "MAX_TOP_KEYS",
    # the workers'
    "PrometheusHooks",
    "serve",
    "serve_worker_metrics",
    "DEFAULT_BUCKETS",
]

_log = logging.getLogger("pgque.metrics")

#: Groups listed per queue in ``pgque_group_head_age_seconds`` unless told otherwise.
DEFAULT_TOP_K = 10
#: The most groups ``pgque_group_head_age_seconds`` may list per queue (label cardinality).
MAX_TOP_K = 100
#: Fairness keys listed per queue in the ``pgque_key_*`` gauges unless told otherwise.
DEFAULT_TOP_KEYS = 20
#: The most fairness keys the ``pgque_key_*`` gauges may list per queue (label cardinality).
MAX_TOP_KEYS = 100
#: Every metric family the collector exposes (the names of the text format, without the
#: ``_total`` suffix of counters), with its help text.
METRIC_NAMES: Mapping[str, str] = {
    "pgque_up": "1 if the queue's stats were read at this scrape, 0 if its backend failed.",
    "pgque_scrape_errors": "Scrapes of the queue that failed since the collector started.",
    "pgque_scrape_duration_seconds": "Time the queue's part of the scrape took.",
    "pgque_messages": "Messages in the queue (every group's, in flight included).",
    "pgque_groups": "Groups in the queue.",
    "pgque_in_flight_groups": "Groups with a live lease.",
    "pgque_parked_groups": "Groups parked by a nack delay.",
    "pgque_blocked_groups": "Groups blocked after their head exhausted max_attempts.",
    "pgque_paused_groups": "Groups held by an operator's pause.",
    "pgque_scheduled_messages": "Messages scheduled for later (delayed publish), not yet due.",
    "pgque_dead_letters": "Messages in the dead-letter store.",
    "pgque_oldest_message_age_seconds": "Age of the oldest message in the queue (0 if empty).",
    "pgque_next_resume_seconds": "Seconds until the earliest parked group resumes (absent: none).",
    "pgque_next_due_seconds": "Seconds until the earliest scheduled message is due (absent: none).",
    "pgque_group_head_age_seconds": "Age of the head message of the groups that waited longest "
    "(top K per queue by head age).",
    "pgque_key_messages": "Messages of the fairness key's groups, its backlog (the top keys per "
    "queue by backlog).",
    "pgque_key_in_flight_groups": "Groups of the fairness key with a live lease (the top keys "
    "per queue by backlog).",
    "pgque_key_oldest_message_age_seconds": "Age of the fairness key's oldest message, 0 if it "
    "has none (the top keys per queue by backlog).",
    "pgque_workers_alive": "Workers of the queue whose last heartbeat is recent (live workers).",
    "pgque_workers_gone": "Workers of the queue that stopped heartbeating without a goodbye "
    "(their rows not yet pruned).",
    "pgque_worker_slots": "Slots of the queue's alive workers (their concurrency, summed).",
    "pgque_worker_slots_busy": "Slots of the queue's alive workers running a message at their "
    "last heartbeat.",
    "pgque_gone_worker_leases": "Unexpired leases held in the name of the queue's gone workers: "
    "groups nobody can run until they expire.",
}

#: prometheus_client (a dependency of pgque-dashboard), used untyped as before: collectors,
#: metric families and registries are built from its names.
_prom: Any = importlib.import_module("prometheus_client")


@dataclass
class _Reading:
    """What one scrape read of one queue."""

    queue: str
    up: bool
    seconds: float
    stats: QueueStats | None = None
    now: float = 0.0
    top: list[tuple[float, GroupInfo]] = field(default_factory=list)
    keys: list[KeyInfo] = field(default_factory=list)
    #: the queue's workers, None on a backend that does not keep live workers
    workers: list[WorkerInfo] | None = None


class _Unlisted(Exception):
    """The queues could not be listed: *queue* (the URL's) stands for the failed backend."""

    def __init__(self, queue: str) -> None:
        super().__init__(queue)
        self.queue = queue


class QueueMetricsCollector:
    """A prometheus_client collector of queue metrics, read from the backend at each scrape.

    *source* is a queue URL (``postgresql://...``, ``redis://...``, ``memory://NAME``) or one or
    several blocking transports. With a URL the queues are *queues*, else every queue the
    backend lists (:class:`~pgque.core.SupportsQueues`, read again at each scrape, so new queues
    appear), else the URL's own queue; transports are opened with ``connect(url, queue=...,
    **connect_options)`` when first needed and reopened after a failure. With transports, each
    is one queue (its ``queue``) and the caller keeps ownership of them.

    The oldest heads: ``pgque_group_head_age_seconds`` holds the *top_k* groups whose heads
    have waited longest, exact whatever the number of groups: one
    :meth:`~pgque.core.Transport.oldest_groups` call per queue, served by an index of enqueue
    times on every backend. The cost of a scrape is thus one ``stats()`` and one
    ``oldest_groups()`` per queue. ``top_k=0`` reads no group.

    The fairness keys: on a transport that has them (``Capabilities.fairness``), the
    ``pgque_key_*`` gauges hold the *top_keys* keys with the most messages (ties: the key in
    byte order), each with its in-flight groups and the age of its oldest message (as
    ``keys()`` reports it, by the store's clock). ``keys()`` lists keys in byte order, not by
    backlog, so a scrape reads every key: one more ``keys()`` call per 1,000 keys of the queue.
    ``top_keys=0`` reads no key; a transport without fairness keys has no such series.

    A queue whose backend raises a PgqueError (or an OSError) is exposed as ``pgque_up 0``
    with ``pgque_scrape_errors_total`` counting up; the other queues are unaffected. Ages are
    measured against this process's clock (``time.time()``), so they are as good as the clock
    agreement between this host and the server.

    With *max_age* > 0 a scrape less than *max_age* seconds after the one that read the
    backend answers with that reading again, so that several scrapers (two Prometheus servers,
    a dashboard) of a large queue cost one read per *max_age*.

    Raises ConfigurationError if *queues* is given with transports, InvalidInput if *top_k*,
    *top_keys* or *max_age* is out of range.
    """

    def __init__(
        self,
        source: str | Transport | Sequence[Transport],
        queues: Sequence[str] | None = None,
        *,
        top_k: int = DEFAULT_TOP_K,
        top_keys: int = DEFAULT_TOP_KEYS,
        connect_options: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
        max_age: float = 0.0,
    ) -> None:
        if not 0 <= max_age <= 3600:
            raise InvalidInput(f"max_age must be between 0 and 3600 seconds, got {max_age}")
        self._max_age = max_age
        self._last: tuple[float, list[_Reading], dict[str, int]] | None = None
        if not 0 <= top_k <= MAX_TOP_K:
            raise InvalidInput(f"top_k must be between 0 and {MAX_TOP_K}, got {top_k}")
        self._top_k = top_k
        if not 0 <= top_keys <= MAX_TOP_KEYS:
            raise InvalidInput(f"top_keys must be between 0 and {MAX_TOP_KEYS}, got {top_keys}")
        self._top_keys = top_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._errors: dict[str, int] = {}
        self._url: str | None = None
        self._fixed: list[str] = []
        self._owned: dict[str, Transport] = {}
        self._given: dict[str, Transport] = {}
        self._options = dict(connect_options or {})
        if isinstance(source, str):
            self._url = source
            self._fixed = list(dict.fromkeys(queues or ()))
            return
        if queues is not None:
            raise ConfigurationError(
                "queues= is for a URL source; a transport is the queue it was opened on"
            )
        if isinstance(source, Sequence):
            # (mypy widens the items to str | Transport: str is a Sequence too.)
            for transport in cast("Sequence[Transport]", source):
                self._given[transport.queue] = transport
        else:
            self._given[source.queue] = source

    @property
    def top_k(self) -> int:
        """How many groups ``pgque_group_head_age_seconds`` lists per queue at most."""
        return self._top_k

    @property
    def top_keys(self) -> int:
        """How many fairness keys the ``pgque_key_*`` gauges list per queue at most."""
        return self._top_keys

    def close(self) -> None:
        """Close the transports this collector opened (not those it was given); idempotent."""
        with self._lock:
            owned, self._owned = self._owned, {}
        for transport in owned.values():
            transport.close()

    # ------------------------------------------------------------------ reading

    def _transport(self, queue: str | None) -> Transport:
        key = "" if queue is None else queue
        found = self._owned.get(key)
        if found is None:
            assert self._url is not None
            options = dict(self._options)
            if queue is not None:
                options["queue"] = queue
            found = self._owned[key] = connect(self._url, **options)
        return found

    def _drop(self, queue: str | None) -> None:
        transport = self._owned.pop("" if queue is None else queue, None)
        if transport is not None:
            try:
                transport.close()
            except (PgqueError, OSError):
                _log.debug("closing a failed transport failed too", exc_info=True)

    def _queues(self) -> list[tuple[str, Transport | None]]:
        """The queues of this scrape, each with its transport (None: open it from the URL).

        Raises _Unlisted when the backend fails to list its queues.
        """
        if self._url is None:
            return [(name, self._given[name]) for name in sorted(self._given)]
        if self._fixed:
            return [(name, None) for name in self._fixed]
        try:
            base = self._transport(None)
            listed = base.queues() if isinstance(base, SupportsQueues) else None
            names = [base.queue] if not listed else [str(n) for n in listed]
        except (PgqueError, OSError) as exc:
            self._drop(None)
            _log.warning("pgque metrics: cannot list the queues: %s", exc)
            raise _Unlisted(self._url_queue()) from exc
        for gone in [name for name in self._owned if name and name not in names]:
            self._drop(gone)  # a queue no longer listed: do not keep its connection
        return [(name, None) for name in names]

    def _url_queue(self) -> str:
        """The queue the URL names (``?queue=``, else the settings' default)."""
        assert self._url is not None
        return str(
            self._options.get("queue") or parse_url(self._url).options.get("queue") or "default"
        )

    def _read(self, queue: str, given: Transport | None) -> _Reading:
        started = time.perf_counter()
        try:
            transport = given if given is not None else self._transport(queue)
            stats = transport.stats()
            now = self._clock()
            top = self._oldest(transport, now)
            keys = self._busiest_keys(transport)
            workers = self._workers(transport)
        except (PgqueError, OSError) as exc:
            if given is None:
                self._drop(queue)
            self._errors[queue] = self._errors.get(queue, 0) + 1
            _log.warning("pgque metrics: queue %r: %s", queue, exc)
            return _Reading(queue, False, time.perf_counter() - started)
        return _Reading(queue, True, time.perf_counter() - started, stats, now, top, keys, workers)

    @staticmethod
    def _workers(transport: Transport) -> list[WorkerInfo] | None:
        """Return the queue's workers, or None on a backend without live workers."""
        if transport.capabilities.workers and isinstance(transport, SupportsWorkers):
            return transport.workers()
        return None

    def _oldest(self, transport: Transport, now: float) -> list[tuple[float, GroupInfo]]:
        """Return the top_k groups with the oldest heads, each with its head's age at *now*."""
        if self._top_k == 0:
            return []
        return [
            (max(0.0, now - (g.head_enqueued_at or now)), g)
            for g in transport.oldest_groups(limit=self._top_k)
        ]

    def _busiest_keys(self, transport: Transport) -> list[KeyInfo]:
        """Return the top_keys fairness keys with the most messages (ties: the key in byte
        order); none on a transport without fairness keys."""
        fair = transport.capabilities.fairness
        if not (self._top_keys and fair and isinstance(transport, SupportsFairness)):
            return []

        def rank(info: KeyInfo) -> tuple[int, bytes]:
            return (-info.messages, info.key.encode("utf-8"))

        # keys() pages in byte order: every page is read, keeping the best top_keys so far.
        busiest: list[KeyInfo] = []
        after: str | None = None
        while True:
            page = transport.keys(MAX_GROUPS_PAGE, after=after)
            busiest = heapq.nsmallest(self._top_keys, [*busiest, *page], key=rank)
            if len(page) < MAX_GROUPS_PAGE:
                return busiest
            after = page[-1].key

    # ------------------------------------------------------------------ exposition

    def describe(self) -> list[Any]:
        """Return no description, so that registering the collector reads no backend."""
        return []

    def collect(self) -> Iterator[Any]:
        """Read every queue and yield the metric families (prometheus_client's Collector API)."""
        with self._lock:
            last = self._last
            if last is not None and time.monotonic() - last[0] < self._max_age:
                readings, errors = last[1], last[2]
            else:
                started = time.perf_counter()
                try:
                    readings = [self._read(queue, given) for queue, given in self._queues()]
                except _Unlisted as down:
                    # The backend failed already: the URL's queue is down, without a second try.
                    self._errors[down.queue] = self._errors.get(down.queue, 0) + 1
                    readings = [_Reading(down.queue, False, time.perf_counter() - started)]
                errors = dict(self._errors)
                self._last = (time.monotonic(), readings, errors)
        yield from self._families(readings, errors)

    def _families(self, readings: list[_Reading], errors: dict[str, int]) -> Iterator[Any]:
        prom = importlib.import_module("prometheus_client.core")
        gauge = prom.GaugeMetricFamily
        up = gauge("pgque_up", METRIC_NAMES["pgque_up"], labels=["queue"])
        failed = prom.CounterMetricFamily(
            "pgque_scrape_errors", METRIC_NAMES["pgque_scrape_errors"], labels=["queue"]
        )
        took = gauge(
            "pgque_scrape_duration_seconds",
            METRIC_NAMES["pgque_scrape_duration_seconds"],
            labels=["queue"],
        )
        for reading in readings:
            up.add_metric([reading.queue], 1.0 if reading.up else 0.0)
            failed.add_metric([reading.queue], float(errors.get(reading.queue, 0)))
            took.add_metric([reading.queue], reading.seconds)
        yield from (up, failed, took)
        counts: list[tuple[str, Callable[[QueueStats], float]]] = [
            ("pgque_messages", lambda s: s.messages),
            ("pgque_groups", lambda s: s.groups),
            ("pgque_in_flight_groups", lambda s: s.in_flight),
            ("pgque_parked_groups", lambda s: s.parked),
            ("pgque_blocked_groups", lambda s: s.blocked),
            ("pgque_paused_groups", lambda s: s.paused),
            ("pgque_scheduled_messages", lambda s: s.scheduled),
            ("pgque_dead_letters", lambda s: s.dead_letters),
            ("pgque_oldest_message_age_seconds", lambda s: s.oldest_age_s or 0.0),
        ]
        live = [(r, r.stats) for r in readings if r.stats is not None]
        for name, value in counts:
            family = gauge(name, METRIC_NAMES[name], labels=["queue"])
            for reading, stats in live:
                family.add_metric([reading.queue], float(value(stats)))
            yield family
        resume = gauge(
            "pgque_next_resume_seconds", METRIC_NAMES["pgque_next_resume_seconds"], labels=["queue"]
        )
        due = gauge(
            "pgque_next_due_seconds", METRIC_NAMES["pgque_next_due_seconds"], labels=["queue"]
        )
        for reading, stats in live:
            if stats.next_resume_at is not None:
                resume.add_metric([reading.queue], max(0.0, stats.next_resume_at - reading.now))
            if stats.next_due_at is not None:
                due.add_metric([reading.queue], max(0.0, stats.next_due_at - reading.now))
        yield from (resume, due)
        heads = gauge(
            "pgque_group_head_age_seconds",
            METRIC_NAMES["pgque_group_head_age_seconds"],
            labels=["queue", "group", "state"],
        )
        for reading, _ in live:
            for age, group in reading.top:
                heads.add_metric([reading.queue, group.group_id, group.state], age)
        yield heads
        per_key: list[tuple[str, Callable[[KeyInfo], float]]] = [
            ("pgque_key_messages", lambda k: k.messages),
            ("pgque_key_in_flight_groups", lambda k: k.in_flight),
            ("pgque_key_oldest_message_age_seconds", lambda k: k.oldest_age_s or 0.0),
        ]
        for name, of_key in per_key:
            family = gauge(name, METRIC_NAMES[name], labels=["queue", "key"])
            for reading, _ in live:
                for info in reading.keys:
                    family.add_metric([reading.queue, info.key], float(of_key(info)))
            yield family
        per_queue: list[tuple[str, Callable[[list[WorkerInfo]], float]]] = [
            ("pgque_workers_alive", lambda ws: sum(1 for w in ws if w.alive)),
            ("pgque_workers_gone", lambda ws: sum(1 for w in ws if not w.alive)),
            ("pgque_worker_slots", lambda ws: sum(w.concurrency for w in ws if w.alive)),
            ("pgque_worker_slots_busy", lambda ws: sum(w.slots_busy for w in ws if w.alive)),
            (
                "pgque_gone_worker_leases",
                lambda ws: sum(len(w.leases) for w in ws if not w.alive),
            ),
        ]
        for name, of_workers in per_queue:
            family = gauge(name, METRIC_NAMES[name], labels=["queue"])
            for reading, _ in live:
                if reading.workers is not None:
                    family.add_metric([reading.queue], float(of_workers(reading.workers)))
            yield family


def metrics_asgi_app(collector: QueueMetricsCollector) -> Any:
    """Return an ASGI application that answers every HTTP request with *collector*'s metrics.

    Mount it at ``/metrics`` of a Starlette or FastAPI app
    (``app.mount("/metrics", metrics_asgi_app(collector))``), or serve it alone. It has a
    registry of its own holding only *collector*, answers in the Prometheus text format, and
    runs the scrape (blocking transports) in a worker thread, so the event loop is never held
    up by a slow backend.
    """
    registry = _prom.CollectorRegistry(auto_describe=False)
    registry.register(collector)
    content_type = str(_prom.CONTENT_TYPE_LATEST).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # lifespan and websocket events: nothing to start or accept
        body = await asyncio.to_thread(_prom.generate_latest, registry)
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


# ---------------------------------------------------------------------- the workers' metrics

#: Handler durations from 5 ms to 5 minutes.
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip

# One set of metric families per (registry, namespace): Prometheus refuses to register a
# name twice, and several workers in one process share the families through labels.
_worker_families: dict[tuple[int, str], tuple[Any, ...]] = {}
_worker_families_lock = threading.Lock()


def _worker_metrics(registry: Any, namespace: str, buckets: Sequence[float]) -> Any:
    key = (id(registry), namespace)
    with _worker_families_lock:
        found = _worker_families.get(key)
        if found is None:
            found = _worker_families[key] = (
                _prom.Counter(
                    f"{namespace}_worker_claimed",
                    "Messages claimed by pgque workers.",
                    ["queue"],
                    registry=registry,
                ),
                _prom.Counter(
                    f"{namespace}_worker_messages",
                    "Messages settled by pgque workers, by outcome.",
                    ["queue", "outcome"],
                    registry=registry,
                ),
                _prom.Histogram(
                    f"{namespace}_worker_handler_seconds",
                    "Time from handler start to settle, by outcome.",
                    ["queue", "outcome"],
                    registry=registry,
                    buckets=tuple(buckets),
                ),
                _prom.Counter(
                    f"{namespace}_worker_errors",
                    "Transport errors met (and survived) by pgque workers.",
                    ["queue", "error"],
                    registry=registry,
                ),
                _prom.Counter(
                    f"{namespace}_worker_stuck",
                    "Reports of a handler running past warn_after (one per warn_after).",
                    ["queue"],
                    registry=registry,
                ),
                _prom.Gauge(
                    f"{namespace}_worker_stuck_handlers",
                    "Handlers running past warn_after now.",
                    ["queue"],
                    registry=registry,
                ),
                _prom.Gauge(
                    f"{namespace}_worker_unstoppable_handlers",
                    "Handlers that had to stop (shutdown grace over, hard_timeout) but run on "
                    "in a thread now, their groups held until they return.",
                    ["queue"],
                    registry=registry,
                ),
            )
        return found


class PrometheusHooks(WorkerHooks):
    """Worker hooks that feed Prometheus counters and a duration histogram.

    *registry* defaults to prometheus_client's global registry; *queue* labels errors that
    concern no lease (a failed claim).
    """

    def __init__(
        self,
        *,
        registry: Any = None,
        namespace: str = "pgque",
        queue: str = "",
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> None:
        self.registry = _prom.REGISTRY if registry is None else registry
        self._queue = queue
        (
            self._claimed,
            self._messages,
            self._seconds,
            self._errors,
            self._stuck,
            self._stuck_now,
            self._unstoppable_now,
        ) = _worker_metrics(self.registry, namespace, buckets)
        self._lock = threading.Lock()
        #: the leases whose handler is past warn_after, by (queue, message id)
        self._stuck_leases: set[tuple[str, int]] = set()
        #: the leases whose handler had to stop but runs on, by (queue, message id)
        self._unstoppable_leases: set[tuple[str, int]] = set()

    def on_claimed(self, lease: Lease) -> None:
        """Count a claim."""
        self._claimed.labels(queue=lease.queue).inc()

    def on_outcome(self, outcome: Outcome, duration_s: float, lease: Lease) -> None:
        """Count an outcome and observe its duration."""
        self._messages.labels(queue=lease.queue, outcome=outcome.value).inc()
        self._seconds.labels(queue=lease.queue, outcome=outcome.value).observe(duration_s)
        if self._stuck_leases:
            with self._lock:
                was_stuck = (lease.queue, lease.message_id) in self._stuck_leases
                self._stuck_leases.discard((lease.queue, lease.message_id))
            if was_stuck:
                self._stuck_now.labels(queue=lease.queue).dec()
        if self._unstoppable_leases:
            with self._lock:
                was_unstoppable = (lease.queue, lease.message_id) in self._unstoppable_leases
                self._unstoppable_leases.discard((lease.queue, lease.message_id))
            if was_unstoppable:
                self._unstoppable_now.labels(queue=lease.queue).dec()

    def on_error(self, error: BaseException, lease: Lease | None) -> None:
        """Count an error by its class name."""
        queue = lease.queue if lease is not None else self._queue
        self._errors.labels(queue=queue, error=type(error).__name__).inc()

    def on_stuck(self, lease: Lease, running_s: float) -> None:
        """Count a stuck-handler report; the gauge counts each lease once until it settles."""
        self._stuck.labels(queue=lease.queue).inc()
        key = (lease.queue, lease.message_id)
        with self._lock:
            new = key not in self._stuck_leases
            self._stuck_leases.add(key)
        if new:
            self._stuck_now.labels(queue=lease.queue).inc()

    def on_unstoppable(self, lease: Lease, running_s: float) -> None:
        """Count a handler that had to stop but runs on in its thread until it settles."""
        key = (lease.queue, lease.message_id)
        with self._lock:
            new = key not in self._unstoppable_leases
            self._unstoppable_leases.add(key)
        if new:
            self._unstoppable_now.labels(queue=lease.queue).inc()


def serve(port: int, addr: str = "127.0.0.1", registry: Any = None) -> Any:
    """Serve ``/metrics`` over HTTP on *addr*:*port* from a daemon thread.

    Binds to localhost by default; pass ``addr="0.0.0.0"`` to expose it. Returns what
    ``prometheus_client.start_http_server`` returns. Raises OSError if the port is taken.
    """
    if registry is None:
        registry = _prom.REGISTRY
    return _prom.start_http_server(port, addr=addr, registry=registry)


def serve_worker_metrics(port: int, addr: str, queue: str) -> WorkerHooks:
    """Serve the worker metrics on *addr*:*port* (:func:`serve`) and return the
    :class:`PrometheusHooks` that feed them, *queue* labelling the errors without a lease.

    ``pgque worker --prometheus-port`` finds it through the entry-point group
    ``pgque.worker_exporters`` (name ``prometheus``). Raises OSError if the port is taken.
    """
    hooks = PrometheusHooks(queue=queue)
    serve(port, addr=addr)
    return hooks
