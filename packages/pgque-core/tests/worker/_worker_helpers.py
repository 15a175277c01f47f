"""Helpers of the worker tests: run a Worker or an AsyncWorker the same way, and wrap a
transport to record calls and inject ConnectionLost."""

from __future__ import annotations

import asyncio
import inspect
import random
import threading
from collections.abc import Callable
from typing import Any

from pgque.core import (
    AsyncInMemoryTransport,
    AsyncWorker,
    ConnectionLost,
    InMemoryTransport,
    MemoryStore,
    Worker,
    WorkerReport,
)

KINDS = ["sync", "async"]
FAST_IDLE = (0.005, 0.05)
FAST_RECONNECT = (0.005, 0.05)
FAULTY_OPS = ("claim", "claim_many", "ack", "nack", "extend", "dead_letter", "stats")


class Faults:
    """Decide which transport calls fail with ConnectionLost, before or after they apply."""

    def __init__(self, rate: float = 0.0, seed: int = 7, ops: tuple[str, ...] = FAULTY_OPS):
        self.rate = rate
        self.ops = ops
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.injected = 0
        self.enabled = True
        self.plan: dict[str, list[str]] = {}

    def decide(self, op: str) -> str:
        """Return "ok", "before" (fail without applying) or "after" (apply, then fail)."""
        with self.lock:
            planned = self.plan.get(op)
            if planned:
                action = planned.pop(0)
            elif self.enabled and op in self.ops and self.rng.random() < self.rate:
                action = self.rng.choice(["before", "after"])
            else:
                action = "ok"
            if action != "ok":
                self.injected += 1
            return action


class Recorder:
    """What a proxied transport was asked, in order."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.calls: list[tuple[str, Any]] = []
        self.results: list[tuple[str, Any, Any]] = []
        #: every call whole: (op, positional arguments, keyword arguments)
        self.full: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def add(
        self,
        op: str,
        arg: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        with self.lock:
            self.calls.append((op, arg))
            self.full.append((op, args, dict(kwargs or {})))

    def done(self, op: str, arg: Any, result: Any) -> None:
        with self.lock:
            self.results.append((op, arg, result))
            self.lock.notify_all()

    def kwargs(self, op: str) -> list[dict[str, Any]]:
        """Return the keyword arguments of every call of *op*, in order."""
        with self.lock:
            return [kwargs for name, _args, kwargs in self.full if name == op]

    def wait_done(self, op: str, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until *count* calls of *op* returned; raise AssertionError after *timeout*."""
        with self.lock:
            done = self.lock.wait_for(
                lambda: sum(1 for name, _a, _r in self.results if name == op) >= count, timeout
            )
        assert done, f"{op} did not return {count} times within {timeout} s"

    def count(self, op: str) -> int:
        with self.lock:
            return sum(1 for name, _ in self.calls if name == op)

    def args(self, op: str) -> list[Any]:
        with self.lock:
            return [arg for name, arg in self.calls if name == op]

    def successes(self, op: str) -> list[Any]:
        """Return the arguments of calls of *op* that applied and returned True."""
        with self.lock:
            return [arg for name, arg, result in self.results if name == op and result is True]


_WRAPPED = ("claim", "claim_many", "ack", "nack", "extend", "dead_letter", "stats", "release")

#: A Part of a fused call: (operation, positional arguments, keyword arguments).
Part = tuple[str, tuple[Any, ...], dict[str, Any]]


def fused_parts(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Part]:
    """The single calls a ``settle_and_claim(*args, **kwargs)`` stands for, in order: one per
    settlement (``ack``, ``nack``, ``release``, ``dead_letter``), then ``claim`` (n == 1) or
    ``claim_many`` (n > 1) when it claims."""
    settlements, n = args[0], args[1]
    visibility = args[2] if len(args) > 2 else kwargs.get("visibility", 30.0)
    parts: list[Part] = []
    for item in settlements:
        if item.outcome == "nack":
            parts.append(("nack", (item.lease,), {"delay": item.delay, "error": item.error}))
        elif item.outcome == "dead_letter":
            parts.append(("dead_letter", (item.lease, item.reason), {"error": item.error}))
        else:
            parts.append((item.outcome, (item.lease,), {}))
    if n:
        holder = kwargs.get("holder")
        label = holder[0] if isinstance(holder, (list, tuple)) else holder
        claim_kwargs = {"min_priority": kwargs.get("min_priority", 0), "holder": label}
        if n == 1:
            parts.append(("claim", (visibility,), claim_kwargs))
        else:
            parts.append(("claim_many", (n, visibility), claim_kwargs))
    return parts


def fused_results(parts: list[Part], result: Any) -> list[Any]:
    """What each part of a fused call returned, as its single call would have."""
    settled = iter(result.settled)
    out: list[Any] = []
    for op, _args, _kwargs in parts:
        if op == "claim":
            out.append(result.leases[0] if result.leases else None)
        elif op == "claim_many":
            out.append(list(result.leases))
        else:
            out.append(next(settled))
    return out


def _key(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if op in ("ack", "extend", "dead_letter", "release"):
        return args[0]
    if op == "nack":
        return (args[0], kwargs.get("delay", 0.0))
    return None


class Proxy:
    """A blocking transport wrapper recording calls and injecting faults."""

    def __init__(self, inner: Any, faults: Faults | None = None, recorder: Recorder | None = None):
        self.inner = inner
        self.faults = faults or Faults()
        self.recorder = recorder or Recorder()

    def _fused_begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Part], str]:
        """Record the parts of a fused call; decide its one fault (the first part's that
        has one: a fused call applies whole or not at all)."""
        parts = fused_parts(args, kwargs)
        action = "ok"
        for op, op_args, op_kwargs in parts:
            self.recorder.add(op, _key(op, op_args, op_kwargs), op_args, op_kwargs)
        for op, _a, _k in parts:
            action = self.faults.decide(op)
            if action != "ok":
                break
        return parts, action

    def _fused_end(self, parts: list[Part], result: Any) -> None:
        for (op, op_args, op_kwargs), value in zip(
            parts, fused_results(parts, result), strict=True
        ):
            self.recorder.done(op, _key(op, op_args, op_kwargs), value)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "settle_and_claim":

            def fused(*args: Any, **kwargs: Any) -> Any:
                parts, action = self._fused_begin(args, kwargs)
                if action == "before":
                    raise ConnectionLost("injected before settle_and_claim")
                result = attr(*args, **kwargs)
                self._fused_end(parts, result)
                if action == "after":
                    raise ConnectionLost("injected after settle_and_claim")
                return result

            return fused
        if name not in _WRAPPED:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            key = _key(name, args, kwargs)
            self.recorder.add(name, key, args, kwargs)
            action = self.faults.decide(name)
            if action == "before":
                raise ConnectionLost(f"injected before {name}")
            result = attr(*args, **kwargs)
            self.recorder.done(name, key, result)
            if action == "after":
                raise ConnectionLost(f"injected after {name}")
            return result

        return call


class AsyncProxy(Proxy):
    """The asyncio twin of :class:`Proxy`."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "settle_and_claim":

            async def fused(*args: Any, **kwargs: Any) -> Any:
                parts, action = self._fused_begin(args, kwargs)
                if action == "before":
                    raise ConnectionLost("injected before settle_and_claim")
                result = await attr(*args, **kwargs)
                self._fused_end(parts, result)
                if action == "after":
                    raise ConnectionLost("injected after settle_and_claim")
                return result

            return fused
        if name not in _WRAPPED:
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            key = _key(name, args, kwargs)
            self.recorder.add(name, key, args, kwargs)
            action = self.faults.decide(name)
            if action == "before":
                raise ConnectionLost(f"injected before {name}")
            result = await attr(*args, **kwargs)
            self.recorder.done(name, key, result)
            if action == "after":
                raise ConnectionLost(f"injected after {name}")
            return result

        return call


def as_async(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Return an ``async def`` with *handler*'s arity that calls it."""
    params = [
        p
        for p in inspect.signature(handler).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(params) >= 2:

        async def with_lease(event: Any, lease: Any) -> Any:
            return handler(event, lease)

        return with_lease

    async def event_only(event: Any) -> Any:
        return handler(event)

    return event_only


def make_transport(kind: str, store: MemoryStore, **options: Any) -> Any:
    """Open a memory transport of *kind* on *store*."""
    if kind == "sync":
        return InMemoryTransport(store=store, **options)
    return AsyncInMemoryTransport(store=store, **options)


def make_worker(kind: str, transport: Any, handler: Any, **options: Any) -> Any:
    """Build a Worker or an AsyncWorker with fast idle and reconnect backoffs."""
    # The tests of single call shapes (one claim per slot) run without the buffer; the tests
    # of the buffer set prefetch themselves.
    options.setdefault("prefetch", 0)
    options.setdefault("idle_backoff", FAST_IDLE)
    options.setdefault("reconnect_backoff", FAST_RECONNECT)
    cls = Worker if kind == "sync" else AsyncWorker
    return cls(transport, handler, **options)


def run(worker: Any, **kwargs: Any) -> WorkerReport:
    """Run either kind of worker to completion (``stop_when_idle`` by default)."""
    kwargs.setdefault("stop_when_idle", True)
    kwargs.setdefault("install_signal_handlers", False)
    if isinstance(worker, AsyncWorker):
        return asyncio.run(worker.run(**kwargs))
    result: WorkerReport = worker.run(**kwargs)
    return result


def run_handler(
    kind: str,
    store: MemoryStore,
    handler: Callable[..., Any],
    *,
    transport_options: dict[str, Any] | None = None,
    wrap: Callable[[Any], Any] | None = None,
    **options: Any,
) -> WorkerReport:
    """Drain *store*'s default queue with a *kind* worker running the sync *handler*
    (converted to ``async def`` for the async kind)."""
    transport = make_transport(kind, store, **(transport_options or {}))
    if wrap is not None:
        transport = wrap(transport)
    if kind == "async":
        handler = as_async(handler)
    return run(make_worker(kind, transport, handler, **options))


def adds_up(report: WorkerReport) -> bool:
    """Whether every lease *report* claimed ended in exactly one outcome (``timed_out``
    counts some of the retried and dead-lettered, not one more outcome)."""
    settled = report.acked + report.retried + report.dead_lettered + report.released + report.lost
    return report.claimed == settled and report.timed_out <= report.retried + report.dead_lettered


def proxy_for(kind: str) -> type[Proxy]:
    """Return the proxy class fitting a transport of *kind*."""
    return Proxy if kind == "sync" else AsyncProxy
