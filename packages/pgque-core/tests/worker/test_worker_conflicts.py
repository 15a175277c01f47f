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
from _worker_helpers import KINDS, as_async, make_transport, make_worker, run

from pgque.core import Event, Lease, MemoryStore, RetryableConflict
from pgque.core.worker import Reject, Retry

pytestmark = [pytest.mark.timeout(30), pytest.mark.parametrize("kind", KINDS)]

OPS = ("claim", "claim_many", "ack", "nack", "extend", "dead_letter", "stats")


class Conflicts:
    """Raise RetryableConflict on the first *times* calls of each operation in *ops*."""

    def __init__(self, inner: Any, ops: tuple[str, ...], times: int) -> None:
        self.inner = inner
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

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in OPS:
            return attr
        if not callable(attr):  # pragma: no cover - every op is a method
            return attr
        conflict = self._conflict

        def call(*args: Any, **kwargs: Any) -> Any:
            if conflict(name):
                raise RetryableConflict(f"deadlock detected (injected into {name})")
            return attr(*args, **kwargs)

        return call


class AsyncConflicts(Conflicts):
    """The asyncio twin of :class:`Conflicts`."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in OPS:
            return attr
        conflict = self._conflict

        async def call(*args: Any, **kwargs: Any) -> Any:
            if conflict(name):
                raise RetryableConflict(f"deadlock detected (injected into {name})")
            return await attr(*args, **kwargs)

        return call


def _wrap(kind: str, store: MemoryStore, ops: tuple[str, ...], times: int) -> Conflicts:
    inner = make_transport(kind, store)
    return Conflicts(inner, ops, times) if kind == "sync" else AsyncConflicts(inner, ops, times)


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


def test_conflicts_on_every_call_lose_nothing(kind: str) -> None:
    """Claims, stats, acks, nacks, extends and dead-letters each conflict twice first."""
    store = MemoryStore()
    sync = make_transport("sync", store)
    for g in range(4):
        sync.publish(f"ok{g}", Event(kind="ok"))
    sync.publish("again", Event(kind="again"))
    sync.publish("bad", Event(kind="bad"))
    sync.publish("slow", Event(kind="slow"))
    transport = _wrap(kind, store, OPS, 2)
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
            time.sleep(0.5)  # outlives the 0.3 s lease: renewed by extend (which conflicts)

    async def async_handler(event: Event, lease: Lease) -> None:
        if event.kind == "slow":
            with lock:
                runs[lease.group_id] += 1
            await asyncio.sleep(0.5)  # the loop must stay free to renew the lease
            return
        handler(event, lease)

    worker = make_worker(
        kind, transport, async_handler if kind == "async" else handler, visibility=0.3
    )
    report = run(worker)
    assert dict(runs) == {"ok0": 1, "ok1": 1, "ok2": 1, "ok3": 1, "again": 2, "bad": 1, "slow": 1}
    assert (report.acked, report.retried, report.dead_lettered, report.lost) == (6, 1, 1, 0)
    for op in ("claim", "ack", "nack", "extend", "dead_letter", "stats"):
        assert transport.raised[op] == 2, op
    letters = sync.dead_letters()
    assert [letter.group_id for letter in letters] == ["bad"]
    assert sync.stats().messages == 0
