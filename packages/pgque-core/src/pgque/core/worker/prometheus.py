"""Export worker metrics to Prometheus (optional: ``pip install 'pgque-core[prometheus]'``).

::

    from pgque.core import Worker, connect
    from pgque.core.worker.prometheus import PrometheusHooks, serve

    serve(9108)  # http://127.0.0.1:9108/metrics
    Worker(connect(url), handler, hooks=PrometheusHooks()).run()

Metrics (``namespace`` defaults to ``pgque``), labelled by ``queue``:

- ``pgque_worker_claimed_total``: messages claimed;
- ``pgque_worker_messages_total{outcome}``: messages settled, by :class:`Outcome`;
- ``pgque_worker_handler_seconds{outcome}``: a histogram of handler-to-settle durations;
- ``pgque_worker_errors_total{error}``: transport errors the worker met and survived;
- ``pgque_worker_stuck_total``: reports of a handler running past the worker's
  ``warn_after`` (one when it crosses it, one more per ``warn_after`` while it runs);
- ``pgque_worker_stuck_handlers``: a gauge of the handlers running past ``warn_after`` now.

Labels carry queue names, outcomes and exception class names only: never group ids or data.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from typing import Any

from pgque.core.errors import ConfigurationError
from pgque.core.install import install_hint
from pgque.core.models import Lease
from pgque.core.worker._outcome import Outcome
from pgque.core.worker.hooks import WorkerHooks

__all__ = ["PrometheusHooks", "serve", "DEFAULT_BUCKETS"]

#: Handler durations from 5 ms to 5 minutes.
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip

_INSTALL_HINT = "Prometheus metrics need the prometheus-client package: " + install_hint(
    "pgque-core[prometheus]"
)


def _require() -> Any:
    """Import prometheus_client, or raise ConfigurationError naming the extra to install."""
    try:
        return importlib.import_module("prometheus_client")
    except ImportError as exc:
        raise ConfigurationError(_INSTALL_HINT) from exc


# One set of metric families per (registry, namespace): Prometheus refuses to register a
# name twice, and several workers in one process share the families through labels.
_families: dict[tuple[int, str], tuple[Any, ...]] = {}
_families_lock = threading.Lock()


def _metrics(prom: Any, registry: Any, namespace: str, buckets: Sequence[float]) -> Any:
    key = (id(registry), namespace)
    with _families_lock:
        found = _families.get(key)
        if found is None:
            found = _families[key] = (
                prom.Counter(
                    f"{namespace}_worker_claimed",
                    "Messages claimed by pgque workers.",
                    ["queue"],
                    registry=registry,
                ),
                prom.Counter(
                    f"{namespace}_worker_messages",
                    "Messages settled by pgque workers, by outcome.",
                    ["queue", "outcome"],
                    registry=registry,
                ),
                prom.Histogram(
                    f"{namespace}_worker_handler_seconds",
                    "Time from handler start to settle, by outcome.",
                    ["queue", "outcome"],
                    registry=registry,
                    buckets=tuple(buckets),
                ),
                prom.Counter(
                    f"{namespace}_worker_errors",
                    "Transport errors met (and survived) by pgque workers.",
                    ["queue", "error"],
                    registry=registry,
                ),
                prom.Counter(
                    f"{namespace}_worker_stuck",
                    "Reports of a handler running past warn_after (one per warn_after).",
                    ["queue"],
                    registry=registry,
                ),
                prom.Gauge(
                    f"{namespace}_worker_stuck_handlers",
                    "Handlers running past warn_after now.",
                    ["queue"],
                    registry=registry,
                ),
                prom.Gauge(
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
    concern no lease (a failed claim). Raises ConfigurationError if prometheus-client is not
    installed.
    """

    def __init__(
        self,
        *,
        registry: Any = None,
        namespace: str = "pgque",
        queue: str = "",
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> None:
        prom = _require()
        self.registry = prom.REGISTRY if registry is None else registry
        self._queue = queue
        (
            self._claimed,
            self._messages,
            self._seconds,
            self._errors,
            self._stuck,
            self._stuck_now,
            self._unstoppable_now,
        ) = _metrics(prom, self.registry, namespace, buckets)
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
    ``prometheus_client.start_http_server`` returns. Raises ConfigurationError if
    prometheus-client is not installed, OSError if the port is taken.
    """
    prom = _require()
    if registry is None:
        registry = prom.REGISTRY
    return prom.start_http_server(port, addr=addr, registry=registry)
