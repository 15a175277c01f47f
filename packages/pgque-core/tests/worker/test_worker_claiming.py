"""Claiming and settling: a finished lease is settled with the next claim, the calls of slots
that finish together go out as one, leases claimed ahead wait in a buffer only so long, and a
transport without the fused call still works."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest
from _worker_helpers import KINDS, as_async, make_transport, make_worker, run

from pgque.core import ConnectionLost, Event, InMemoryTransport, Lease, MemoryStore, SettleResult
from pgque.core.worker import _async as async_worker
from pgque.core.worker import _sync as sync_worker
from pgque.core.worker._claiming import planning
from pgque.core.worker._names import holder_label

pytestmark = [pytest.mark.timeout(30), pytest.mark.parametrize("kind", KINDS)]


class Calls:
    """Wrap a memory transport: record every settle_and_claim as (settlements, n, holder);
    with *gate*, hold the first call that settles anything until *gate* returns True."""

    def __init__(self, inner: Any, gate: Any = None) -> None:
        self.inner = inner
        self.gate = gate
        self.calls: list[tuple[int, int, Any]] = []
        self.lock = threading.Lock()
        self.gated = False
        self.in_gated_call = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _before(self, settlements: Any, n: int, kwargs: dict[str, Any]) -> bool:
        with self.lock:
            self.calls.append((len(settlements), n, kwargs.get("holder")))
            hold = self.gate is not None and settlements and not self.gated
            if hold:
                self.gated = True
                self.in_gated_call = len(settlements)
        return bool(hold)

    def _wait_gate(self) -> None:
        deadline = time.monotonic() + 10
        while not self.gate(self.in_gated_call):
            assert time.monotonic() < deadline, "the other settlements never queued"
            time.sleep(0.001)


class SyncCalls(Calls):
    def settle_and_claim(self, settlements: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        if self._before(settlements, n, kwargs):
            self._wait_gate()
        return self.inner.settle_and_claim(settlements, n, *args, **kwargs)


class AsyncCalls(Calls):
    async def settle_and_claim(self, settlements: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        if self._before(settlements, n, kwargs):
            while not self.gate(self.in_gated_call):  # noqa: ASYNC110 - polls worker state
                await asyncio.sleep(0.001)  # the slots run on this loop: let them
        return await self.inner.settle_and_claim(settlements, n, *args, **kwargs)


def _wrap(kind: str, store: MemoryStore, gate: Any = None) -> Calls:
    inner = make_transport(kind, store)
    return SyncCalls(inner, gate) if kind == "sync" else AsyncCalls(inner, gate)


def _publish(store: MemoryStore, groups: int, per_group: int = 1) -> InMemoryTransport:
    queue = InMemoryTransport(store=store)
    for i in range(per_group):
        for g in range(groups):
            queue.publish(f"g{g:03d}", Event(kind="k", data={"i": i}))
    return queue


def _noop(kind: str) -> Any:
    def handler(event: Event) -> None:
        pass

    return as_async(handler) if kind == "async" else handler


def test_settlements_that_queue_while_a_call_is_out_go_together_in_the_next(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: one batcher loop; the four slots each hold a lease (a barrier) before
    any settles; the first call that settles is held until the other slots have queued
    their settlements; the next call carries all of them. (This is how a busy worker makes far
    fewer calls than it handles messages; a count of calls over a free run would depend on how
    the machine schedules threads.)"""
    module = sync_worker if kind == "sync" else async_worker
    monkeypatch.setattr(module, "ROUND_TRIP_LOOPS", 1)
    store = MemoryStore()
    queue = _publish(store, groups=4)
    holder: dict[str, Any] = {}

    def the_others_queued(in_call: int) -> bool:
        return len(holder["worker"]._run.settling) == 4 - in_call

    transport = _wrap(kind, store, gate=the_others_queued)
    all_out = threading.Barrier(4, timeout=10)

    def handler(event: Event) -> None:
        all_out.wait()  # every slot holds its lease before any settles

    # a plain function: both kinds of worker run it in handler threads
    worker = make_worker(kind, transport, handler, concurrency=4)
    holder["worker"] = worker
    report = run(worker)
    assert report.acked == 4
    assert queue.stats().messages == 0
    settling = [s for s, _n, _h in transport.calls if s]
    # the held call's settlements, then every other one in the next call, none alone
    assert sum(settling) == 4
    assert len(settling) <= 2


def test_a_batched_call_names_each_slot_and_the_buffer(kind: str) -> None:
    store = MemoryStore()
    queue = _publish(store, groups=40)
    transport = _wrap(kind, store)
    seen: list[str | None] = []
    lock = threading.Lock()

    def handler(event: Event, lease: Lease) -> None:
        info = queue.group(lease.group_id)
        assert info is not None
        with lock:
            seen.append(info.lease_holder)

    worker = make_worker(
        kind,
        transport,
        as_async(handler) if kind == "async" else handler,
        concurrency=4,
        prefetch=4,
    )
    report = run(worker)
    assert report.acked == 40
    slots = {holder_label(i) for i in range(4)}
    queued = holder_label("queued")
    assert set(seen) <= slots | {queued}
    assert set(seen) & slots  # slots that waited were named
    for _s, n, holders in transport.calls:
        if n:
            assert isinstance(holders, list)
            assert len(holders) == n
            waiting = [h for h in holders if h != queued]
            assert len(waiting) == len(set(waiting))  # one label per waiting slot


def test_a_lease_left_in_the_buffer_is_released_within_its_hold(kind: str) -> None:
    """One slot, a buffer of one, a lease of 0.8 s (hold: 0.2 s). The slot's handler for g000
    runs 0.7 s; g001's lease, claimed into the buffer, is released meanwhile (not counted),
    and runs later at attempt 1."""
    store = MemoryStore()
    queue = _publish(store, groups=2)
    states: list[str] = []
    attempts: Counter[str] = Counter()

    def look() -> None:
        info = queue.group("g001")
        assert info is not None
        states.append(info.state)

    def handler(event: Event, lease: Lease) -> None:
        attempts[lease.group_id] = lease.attempt
        if lease.group_id == "g000":
            time.sleep(0.6)
            look()
            time.sleep(0.1)

    async def async_handler(event: Event, lease: Lease) -> None:
        attempts[lease.group_id] = lease.attempt
        if lease.group_id == "g000":
            await asyncio.sleep(0.6)  # the worker's loop runs meanwhile
            look()
            await asyncio.sleep(0.1)

    transport = make_transport(kind, store)
    worker = make_worker(
        kind,
        transport,
        async_handler if kind == "async" else handler,
        concurrency=1,
        prefetch=1,
        visibility=0.8,
    )
    report = run(worker)
    assert report.acked == 2
    assert report.released >= 1
    assert report.claimed == report.acked + report.released
    assert states == ["ready"]  # given back long before its lease would have run out
    assert attempts == {"g000": 1, "g001": 1}  # the release did not count


class Plain:
    """A third-party transport: the contract's single calls only, no settle_and_claim and no
    max_attempts / on_exhausted properties."""

    _ALLOWED = frozenset(
        {
            "queue",
            "capabilities",
            "claim",
            "claim_many",
            "ack",
            "nack",
            "release",
            "dead_letter",
            "extend",
            "stats",
        }
    )

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name not in self._ALLOWED:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_transport_without_the_fused_call_gets_the_single_calls(kind: str) -> None:
    store = MemoryStore()
    queue = _publish(store, groups=10, per_group=3)
    transport = Plain(make_transport(kind, store))
    report = run(make_worker(kind, transport, _noop(kind), concurrency=3, prefetch=None))
    assert report.acked == 30
    assert queue.stats().messages == 0


def test_blocking_handlers_reuse_their_threads(kind: str) -> None:
    store = MemoryStore()
    _publish(store, groups=50, per_group=2)
    idents: set[int] = set()
    lock = threading.Lock()

    def handler(event: Event) -> None:
        with lock:
            idents.add(threading.get_ident())

    # a plain function: the blocking worker runs it in handler threads, the asyncio worker too
    report = run(make_worker(kind, make_transport(kind, store), handler, concurrency=2))
    assert report.acked == 100
    assert len(idents) <= 4  # not a thread per message


def test_slow_handlers_keep_few_leases_ahead_and_fast_ones_many(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The buffer follows the rate the slots take leases: two slots whose handlers take 50 ms
    (about 40 leases a second: ~2 in the 50 ms horizon) never ask for more than a handful;
    eight no-op slots soon ask for more than the eight slots need."""
    store = MemoryStore()
    _publish(store, groups=30)
    slow = _wrap(kind, store)

    def handler(event: Event) -> None:
        time.sleep(0.05)

    report = run(make_worker(kind, slow, handler, concurrency=2, prefetch=None))
    assert report.acked == 30
    asked = [n for _s, n, _h in slow.calls if n]
    assert max(asked) <= 5, asked  # two slots and a buffer of two or three

    # The buffer holds what the slots take in BUFFER_HORIZON: 0.05 s needs 320 no-op runs a
    # second to ask for more than 16, which a loaded machine may not reach; over 1 s, 17 do.
    monkeypatch.setattr(planning, "BUFFER_HORIZON", 1.0)
    store = MemoryStore()
    _publish(store, groups=400)
    fast = _wrap(kind, store)
    report = run(make_worker(kind, fast, _noop(kind), concurrency=8, prefetch=None))
    assert report.acked == 400
    assert max(n for _s, n, _h in fast.calls) > 16


def test_slots_that_ask_for_more_than_one_call_takes_are_served_over_several(kind: str) -> None:
    """100 slots of batch 100 and a buffer of 10,000 ask for 20,000 leases: each call asks for
    at most 10,000 (the contract's limit), the rest waits for the next call."""
    store = MemoryStore()
    queue = _publish(store, groups=50)
    transport = _wrap(kind, store)
    report = run(
        make_worker(kind, transport, _noop(kind), concurrency=100, batch_size=100, prefetch=10_000)
    )
    assert (report.acked, report.errors) == (50, 0)
    assert queue.stats().messages == 0
    assert max(n for _s, n, _h in transport.calls) <= 10_000


class FailingSettles(Calls):
    """Every call that settles something fails with ConnectionLost (the server is gone)."""

    def _check(self, settlements: Any) -> None:
        with self.lock:
            self.calls.append((len(settlements), 0, None))
        if settlements:
            raise ConnectionLost("the server went away")


class SyncFailingSettles(FailingSettles):
    def settle_and_claim(self, settlements: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        self._check(settlements)
        return self.inner.settle_and_claim(settlements, n, *args, **kwargs)


class AsyncFailingSettles(FailingSettles):
    async def settle_and_claim(self, settlements: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        self._check(settlements)
        return await self.inner.settle_and_claim(settlements, n, *args, **kwargs)


def test_a_stop_does_not_leave_settlements_retried_behind_it(kind: str) -> None:
    """An ack retried through an outage past the shutdown grace is given up (lost), and the
    run returns only once its round trips stopped: no call after it, counts that add up."""
    store = MemoryStore()
    _publish(store, groups=1)
    inner = make_transport(kind, store)
    transport = SyncFailingSettles(inner) if kind == "sync" else AsyncFailingSettles(inner)
    handled = threading.Event()

    def handler(event: Event) -> None:
        handled.set()

    worker = make_worker(kind, transport, handler, shutdown_grace=0.2, visibility=30.0)

    def stop_after_handling() -> None:
        assert handled.wait(10)
        time.sleep(0.2)  # the ack is being retried now
        worker.stop()

    stopper = threading.Thread(target=stop_after_handling)
    stopper.start()
    report = run(worker, stop_when_idle=False)
    stopper.join()
    calls_at_return = len(transport.calls)
    time.sleep(0.5)
    assert len(transport.calls) == calls_at_return  # nothing runs on after run() returned
    assert report.claimed == report.settled == report.lost == 1
    assert report.errors >= 1


class PartlyFailing:
    """A transport without settle_and_claim whose claim fails once, right after an ack."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.acked = 0
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        if name in ("settle_and_claim", "max_attempts", "on_exhausted"):
            raise AttributeError(name)
        attr = getattr(self._inner, name)
        if name not in ("ack", "claim"):
            return attr
        if asyncio.iscoroutinefunction(attr):

            async def acall(*args: Any, **kwargs: Any) -> Any:
                return self._after(name, await self._before(name, attr, *args, **kwargs))

            return acall

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._after(name, self._before(name, attr, *args, **kwargs))

        return call

    def _before(self, name: str, attr: Any, *args: Any, **kwargs: Any) -> Any:
        if name == "claim" and self.acked and not self.failed:
            self.failed = True
            raise ConnectionLost("the claim after the ack failed")
        return attr(*args, **kwargs)

    def _after(self, name: str, result: Any) -> Any:
        if name == "ack" and result is True:
            self.acked += 1
        return result


def test_single_calls_that_fail_part_of_the_way_count_what_they_did(kind: str) -> None:
    """Without settle_and_claim the worker makes the single calls; when the claim after an ack
    fails, the ack that went through counts as acked, not lost."""
    store = MemoryStore()
    queue = _publish(store, groups=1, per_group=3)
    transport = PartlyFailing(make_transport(kind, store))
    report = run(make_worker(kind, transport, _noop(kind), prefetch=0))
    assert transport.failed
    assert (report.acked, report.lost) == (3, 0)
    assert report.errors == 1
    assert queue.stats().messages == 0


class WrongAnswers(Calls):
    """A transport that breaks the contract once: settle_and_claim answers no results."""

    def _broken(self) -> bool:
        with self.lock:
            if self.gated:
                return False
            self.gated = True
            return True


class SyncWrongAnswers(WrongAnswers):
    def settle_and_claim(self, settlements: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        result = self.inner.settle_and_claim(settlements, n, *args, **kwargs)
        if settlements and self._broken():
            return SettleResult([], result.leases)
        return result


class AsyncWrongAnswers(WrongAnswers):
    async def settle_and_claim(self, settlements: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        result = await self.inner.settle_and_claim(settlements, n, *args, **kwargs)
        if settlements and self._broken():
            return SettleResult([], result.leases)
        return result


def test_a_transport_that_answers_wrong_is_an_error_not_a_hang(kind: str) -> None:
    store = MemoryStore()
    _publish(store, groups=3, per_group=2)
    inner = make_transport(kind, store)
    transport = SyncWrongAnswers(inner) if kind == "sync" else AsyncWrongAnswers(inner)
    report = run(make_worker(kind, transport, _noop(kind), visibility=0.5))
    assert report.errors >= 1
    assert report.claimed == report.settled
    assert report.acked >= 5  # the rest went on; a message of the broken call came back
