"""RetryableConflict (a deadlock or serialization failure, rolled back whole) on any transport
call: the worker retries with bounded backoff and handles every message exactly once, losing
no lease. The double below wraps the in-memory transport and raises RetryableConflict the
first N times each chosen operation is called, before it applies (as the server rolls the
whole call back)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest
from _worker_helpers import KINDS, as_async, fused_parts, make_transport, make_worker, run

from pgque.conformance.clock import FakeClock
from pgque.core import Event, Lease, MemoryStore, RetryableConflict
from pgque.core.worker import Reject, Retry
from pgque.core.worker import _async as async_worker
from pgque.core.worker import _options as worker_options
from pgque.core.worker import _sync as sync_worker

pytestmark = [pytest.mark.timeout(30), pytest.mark.parametrize("kind", KINDS)]

OPS = ("claim", "claim_many", "ack", "nack", "extend", "dead_letter", "stats")


class Conflicts:
    """Raise RetryableConflict on the first *times* calls of each operation in *ops*."""

    def __init__(
        self, inner: Any, ops: tuple[str, ...], times: int, watch: Renewals | None = None
    ) -> None:
        self.inner = inner
        self.watch = watch
        self.left = dict.fromkeys(ops, times)
        self.raised: Counter[str] = Counter()
        self.lock = threading.Lock()

    def _conflict(self, name: str) -> bool:
        with self.lock:
            if self.left.get(name, 0) > 0:
                self.left[name] -= 1
                self.raised[name] += 1
                return True
            return False

    def _fused_conflict(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The part of a fused call that conflicts (the whole call rolls back), if any."""
        parts = [op for op, _a, _k in fused_parts(args, kwargs)]
        if self.watch is not None:
            for op in parts:
                self.watch.before(op)
        return next((op for op in parts if self._conflict(op)), None)

    def _fused_done(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        if self.watch is not None:
            for op, _a, _k in fused_parts(args, kwargs):
                if op in ("claim", "claim_many"):
                    leases = result.leases
                    self.watch.after(
                        op, (leases[0] if leases else None) if op == "claim" else leases
                    )

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "settle_and_claim":

            def fused(*args: Any, **kwargs: Any) -> Any:
                op = self._fused_conflict(args, kwargs)
                if op is not None:
                    raise RetryableConflict(f"deadlock detected (injected into {op})")
                result = attr(*args, **kwargs)
                self._fused_done(args, kwargs, result)
                return result

            return fused
        if name not in OPS:
            return attr
        if not callable(attr):  # pragma: no cover - every op is a method
            return attr
        conflict = self._conflict

        watch = self.watch

        def call(*args: Any, **kwargs: Any) -> Any:
            if watch is not None:
                watch.before(name)
            if conflict(name):
                raise RetryableConflict(f"deadlock detected (injected into {name})")
            result = attr(*args, **kwargs)
            if watch is not None:
                watch.after(name, result)
            return result

        return call


class AsyncConflicts(Conflicts):
    """The asyncio twin of :class:`Conflicts`."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "settle_and_claim":

            async def fused(*args: Any, **kwargs: Any) -> Any:
                op = self._fused_conflict(args, kwargs)
                if op is not None:
                    raise RetryableConflict(f"deadlock detected (injected into {op})")
                result = await attr(*args, **kwargs)
                self._fused_done(args, kwargs, result)
                return result

            return fused
        if name not in OPS:
            return attr
        conflict = self._conflict

        watch = self.watch

        async def call(*args: Any, **kwargs: Any) -> Any:
            if watch is not None:
                watch.before(name)
            if conflict(name):
                raise RetryableConflict(f"deadlock detected (injected into {name})")
            result = await attr(*args, **kwargs)
            if watch is not None:
                watch.after(name, result)
            return result

        return call


def _wrap(
    kind: str,
    store: MemoryStore,
    ops: tuple[str, ...],
    times: int,
    *,
    clock: FakeClock | None = None,
    watch: Renewals | None = None,
) -> Conflicts:
    inner = make_transport(kind, store, clock=clock)
    cls = Conflicts if kind == "sync" else AsyncConflicts
    return cls(inner, ops, times, watch)


def test_conflicting_acks_are_retried_and_each_message_runs_once(kind: str) -> None:
    store = MemoryStore()
    sync = make_transport("sync", store)
    for g in range(5):
        sync.publish(f"g{g}", Event(kind="k"))
    transport = _wrap(kind, store, ("ack",), 3)
    runs: Counter[int] = Counter()

    def handler(event: Event, lease: Lease) -> None:
        runs[lease.message_id] += 1

    worker = make_worker(
        kind, transport, as_async(handler) if kind == "async" else handler, visibility=1.0
    )
    report = run(worker)
    assert transport.raised["ack"] == 3
    assert sorted(runs.values()) == [1] * 5  # no ack lost, so nothing was delivered again
    assert (report.acked, report.lost, report.errors) == (5, 0, 3)
    assert sync.stats().messages == 0


class Renewals:
    """Watch the successful renewals of one group's leases, after a first *stall* (seconds of
    a busy machine, the event loop included) on the first extend call."""

    def __init__(self, group: str, stall: float) -> None:
        self.group, self.stall = group, stall
        self.renewed = threading.Event()
        self.stalled = False

    def before(self, name: str) -> None:
        if name == "extend" and not self.stalled:
            self.stalled = True
            time.sleep(self.stall)

    def after(self, name: str, result: Any) -> None:
        if name == "extend" and result is not None and result.group_id == self.group:
            self.renewed.set()


def test_conflicts_on_every_call_lose_nothing(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims, stats, acks, nacks, extends and dead-letters each conflict twice first.

    Deterministic: lease times follow a fake clock that only the "slow" handler moves, and the
    worker's own estimate of a lease's end (30 s of visibility) is far from any stall. The slow
    handler moves the clock to 20 s into its lease, waits until an extend of its lease went
    through (after the conflicts), then moves it to 40 s: past the first lease's end, so its ack
    holds only because the conflicting renewal was retried. Renewals are made every 0.3 s
    (EXTEND_FRACTION scaled down) so the test stays short, and the first extend stalls 0.4 s
    (more than the whole lease of an earlier, timing-dependent version of this test)."""
    monkeypatch.setattr(worker_options, "EXTEND_FRACTION", 0.01)
    clock = FakeClock()
    store = MemoryStore()
    sync = make_transport("sync", store, clock=clock)
    for g in range(4):
        sync.publish(f"ok{g}", Event(kind="ok"))
    sync.publish("again", Event(kind="again"))
    sync.publish("bad", Event(kind="bad"))
    sync.publish("slow", Event(kind="slow"))
    watch = Renewals("slow", stall=0.4)
    transport = _wrap(kind, store, OPS, 2, clock=clock, watch=watch)
    runs: Counter[str] = Counter()
    lock = threading.Lock()

    def handler(event: Event, lease: Lease) -> None:
        with lock:
            runs[lease.group_id] += 1
        if event.kind == "again" and lease.attempt == 1:
            raise Retry(0.0)
        if event.kind == "bad":
            raise Reject("not wanted")
        if event.kind == "slow":
            clock.advance(20)
            assert watch.renewed.wait(10), "the lease was never renewed"
            clock.advance(20)  # the first lease (30 s) is over; the renewed one holds

    async def async_handler(event: Event, lease: Lease) -> None:
        if event.kind == "slow":
            with lock:
                runs[lease.group_id] += 1
            clock.advance(20)
            # The loop must stay free to renew the lease meanwhile.
            renewed = await asyncio.to_thread(watch.renewed.wait, 10)
            assert renewed, "the lease was never renewed"
            clock.advance(20)
            return
        handler(event, lease)

    worker = make_worker(
        kind, transport, async_handler if kind == "async" else handler, visibility=30.0
    )
    report = run(worker)
    assert dict(runs) == {"ok0": 1, "ok1": 1, "ok2": 1, "ok3": 1, "again": 2, "bad": 1, "slow": 1}
    assert (report.acked, report.retried, report.dead_lettered, report.lost) == (6, 1, 1, 0)
    for op in ("claim", "ack", "nack", "extend", "dead_letter", "stats"):
        assert transport.raised[op] == 2, op
    letters = sync.dead_letters()
    assert [letter.group_id for letter in letters] == ["bad"]
    assert sync.stats().messages == 0


def test_conflict_retries_are_jittered(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers whose calls deadlocked each other must not retry in lockstep: the waits
    after a conflict are spread below each backoff step (recorded, not slept)."""
    pauses: list[float] = []
    if kind == "sync":
        original_sync = sync_worker._pause

        def fake_sync(until: Any, seconds: float) -> None:
            pauses.append(seconds)
            original_sync(until, 0.0)

        monkeypatch.setattr(sync_worker, "_pause", fake_sync)
    else:
        original_async = async_worker._pause

        async def fake_async(until: Any, seconds: float) -> None:
            pauses.append(seconds)
            await original_async(until, 0.0)

        monkeypatch.setattr(async_worker, "_pause", fake_async)
    store = MemoryStore()
    make_transport("sync", store).publish("g", Event(kind="k"))
    transport = _wrap(kind, store, ("claim",), 6)

    def handler(event: Event) -> None:
        pass

    worker = make_worker(
        kind,
        transport,
        as_async(handler) if kind == "async" else handler,
        reconnect_backoff=(0.4, 0.4),
    )
    report = run(worker)
    assert report.acked == 1
    waits = [p for p in pauses if p > 0.1]  # idle waits are at most 0.05 s
    assert len(waits) == 6
    assert all(0.2 <= wait <= 0.4 for wait in waits)
    assert len(set(waits)) > 1
