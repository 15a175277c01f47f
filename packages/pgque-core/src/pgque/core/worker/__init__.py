"""The pgque worker: run a handler on a queue's messages with retries, lease renewal, hard
timeouts, graceful shutdown, reconnection and metrics hooks.

:class:`Worker` uses threads, :class:`AsyncWorker` asyncio tasks; both take the same options.
See docs/worker.md.
"""

from __future__ import annotations

from pgque.core.worker._async import AsyncWorker
from pgque.core.worker._options import DEFAULT_HARD_TIMEOUT, EXTEND_FRACTION, WorkerOptions
from pgque.core.worker._outcome import Outcome, WorkerReport
from pgque.core.worker._policy import Backoff, Reject, Retry, RetryPolicy, StopWorker
from pgque.core.worker._running.handlers import wants_lease
from pgque.core.worker._running.processes import HandlerKilled, HandlerProcessDied, Isolation
from pgque.core.worker._sync import Worker
from pgque.core.worker.hooks import CompositeHooks, MetricsHooks, Timing, WorkerHooks

__all__ = [
    "Worker",
    "AsyncWorker",
    "WorkerOptions",
    "WorkerReport",
    "Outcome",
    "RetryPolicy",
    "Backoff",
    "Retry",
    "Reject",
    "StopWorker",
    "Isolation",
    "HandlerKilled",
    "HandlerProcessDied",
    "wants_lease",
    "WorkerHooks",
    "MetricsHooks",
    "CompositeHooks",
    "Timing",
    "EXTEND_FRACTION",
    "DEFAULT_HARD_TIMEOUT",
]
