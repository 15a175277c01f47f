"""What the worker tells the transport about each message, on both runners, on memory: the
failure it records (``nack``/``dead_letter`` with ``error=``, a hard timeout as a
TimeoutError), who holds a lease (``claim(holder=)``), a release at shutdown that does not
count the attempt, and the log line of a last attempt (no "retry in" when none follows)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from typing import Any

import pytest
from _worker_helpers import (
    KINDS,
    Recorder,
    make_transport,
    make_worker,
    proxy_for,
    run,
    run_handler,
)

from pgque.conformance.clock import FakeClock
from pgque.core import Event, GroupInfo, InMemoryTransport, Lease, MemoryStore, Reject, Retry
from pgque.core.worker import MetricsHooks, RetryPolicy, StopWorker
from pgque.core.worker._names import holder_label

pytestmark = pytest.mark.timeout(30)

HOST_PID = f"{socket.gethostname()}:{os.getpid()}"
#: No waiting between attempts: the tests move on as soon as a message is back.
AT_ONCE = RetryPolicy(base=0.0, jitter=0.0)


def _queue(store: MemoryStore, groups: int = 1, **options: Any) -> InMemoryTransport:
    queue = InMemoryTransport(store=store, **options)
    for g in range(groups):
        queue.publish(f"g{g}", Event(kind="k", data={"g": g}))
    return queue


@pytest.mark.parametrize("kind", KINDS)
def test_a_retry_records_the_exception_as_the_groups_last_error(kind: str) -> None:
    store = MemoryStore()
    queue = _queue(store)
    seen: list[GroupInfo | None] = []

    def handler(event: Event, lease: Lease) -> None:
        if lease.attempt == 1:
            raise ValueError("bad sku")
        seen.append(queue.group("g0"))

    report = run_handler(kind, store, handler, retry=AT_ONCE)
    assert (report.retried, report.acked) == (1, 1)
    [info] = seen
    assert info is not None
    assert info.last_error is not None
    assert (info.last_error.type, info.last_error.message) == ("ValueError", "bad sku")
    assert info.last_error.traceback is not None
    assert 'raise ValueError("bad sku")' in info.last_error.traceback
    assert info.head_attempts == 2


@pytest.mark.parametrize("kind", KINDS)
def test_an_exhausted_message_is_dead_lettered_with_its_last_error(kind: str) -> None:
    store = MemoryStore()
    queue = _queue(store, max_attempts=2)

    def handler(event: Event, lease: Lease) -> None:
        raise ValueError(f"bad sku (attempt {lease.attempt})")

    report = run_handler(kind, store, handler, retry=AT_ONCE, transport_options={"max_attempts": 2})
    assert (report.retried, report.dead_lettered) == (1, 1)  # the last attempt: dead-lettered
    [letter] = queue.dead_letters()
    assert letter.reason == "max_attempts (2) exhausted"
    assert letter.error is not None
    assert (letter.error.type, letter.error.message) == ("ValueError", "bad sku (attempt 2)")


@pytest.mark.parametrize("kind", KINDS)
def test_reject_dead_letters_with_the_reject_and_its_cause(kind: str) -> None:
    store = MemoryStore()
    queue = _queue(store)

    def handler(event: Event) -> None:
        try:
            _ = event.headers["sku"]
        except KeyError as exc:
            raise Reject("malformed order") from exc

    report = run_handler(kind, store, handler)
    assert report.dead_lettered == 1
    [letter] = queue.dead_letters()
    assert letter.reason == "malformed order"
    assert letter.error is not None
    assert letter.error.type.endswith("Reject")
    assert letter.error.message == "malformed order"
    assert letter.error.traceback is not None
    assert "KeyError: 'sku'" in letter.error.traceback  # the cause is kept in the traceback
    assert "raise Reject" in letter.error.traceback


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("on_exhausted", "says"),
    [
        ("dead_letter", "it will be dead-lettered"),
        ("block", "its group will be blocked"),
    ],
)
def test_the_last_attempt_says_what_follows_instead_of_retry_in(
    kind: str, on_exhausted: str, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pgque.worker")
    store = MemoryStore()
    options: dict[str, Any] = {"max_attempts": 2, "on_exhausted": on_exhausted}
    queue = _queue(store, **options)
    recorder = Recorder()

    def handler(event: Event) -> None:
        raise ValueError("bad sku")

    report = run_handler(
        kind,
        store,
        handler,
        # 10 ms after the first attempt; none after the last, whatever the policy says
        retry=RetryPolicy(base=0.01, factor=1.0, jitter=0.0),
        transport_options=options,
        wrap=lambda t: proxy_for(kind)(t, recorder=recorder),
    )
    # The last failure ends in a dead letter (counted so), or in a blocked group (retried).
    counts = (2, 0) if on_exhausted == "block" else (1, 1)
    assert (report.retried, report.dead_lettered) == counts
    assert [kwargs["delay"] for kwargs in recorder.kwargs("nack")] == [0.01, 0.0]
    failures = [r.getMessage() for r in caplog.records if "handler failed" in r.getMessage()]
    assert len(failures) == 2
    assert "(attempt 1)" in failures[0]
    assert "retry in 0.01s" in failures[0]
    assert "(attempt 2)" in failures[1]
    assert "retry in" not in failures[1]
    assert "max_attempts (2)" in failures[1]
    assert says in failures[1]
    info = queue.group("g0")
    if on_exhausted == "block":
        assert info is not None
        assert info.state == "blocked"
        assert info.last_error is not None
        assert info.last_error.message == "bad sku"
    else:
        assert info is None
        [letter] = queue.dead_letters()
        assert letter.error is not None
        assert letter.error.message == "bad sku"


@pytest.mark.parametrize("kind", KINDS)
def test_a_retry_asked_on_the_last_attempt_is_not_delayed(kind: str) -> None:
    store = MemoryStore()
    queue = _queue(store, max_attempts=1)
    recorder = Recorder()

    def handler(event: Event) -> None:
        raise Retry(600.0)  # waiting would only hold the group: no attempt is left

    report = run_handler(
        kind,
        store,
        handler,
        transport_options={"max_attempts": 1},
        wrap=lambda t: proxy_for(kind)(t, recorder=recorder),
    )
    assert (report.retried, report.dead_lettered) == (0, 1)
    assert [kwargs["delay"] for kwargs in recorder.kwargs("nack")] == [0.0]
    [letter] = queue.dead_letters()
    assert letter.reason == "max_attempts (1) exhausted"
    assert letter.error is not None
    assert letter.error.type.endswith("Retry")


def _blocked_first_attempt(
    kind: str, gate: threading.Event, seen: list[GroupInfo | None], queue: InMemoryTransport
) -> Any:
    """A handler whose first attempt hangs (until *gate*, or cancelled) and whose second
    attempt records its group as *queue* shows it in *seen*."""

    def sync_handler(event: Event, lease: Lease) -> None:
        if lease.attempt == 1:
            gate.wait(20)
            return
        seen.append(queue.group(lease.group_id))

    async def async_handler(event: Event, lease: Lease) -> None:
        if lease.attempt == 1:
            await asyncio.sleep(20)  # cancelled at the hard timeout
            return
        seen.append(queue.group(lease.group_id))

    return sync_handler if kind == "sync" else async_handler


@pytest.mark.parametrize("kind", KINDS)
def test_a_hard_timeout_is_recorded_as_a_timeout_error_naming_the_limit(kind: str) -> None:
    """The handler stopped at its hard timeout is nacked with a TimeoutError naming the limit,
    with the retry policy's delay. An asyncio task is cancelled; a thread cannot be, so its
    lease is kept and the nack waits until it returns. Deterministic: the queue's clock moves
    only when the test moves it, after the nack returned, so the second attempt can only come
    from that nack."""
    clock = FakeClock()
    store = MemoryStore()
    queue = _queue(store, clock=clock)
    recorder = Recorder()
    gate = threading.Event()
    seen: list[GroupInfo | None] = []
    handler = _blocked_first_attempt(kind, gate, seen, queue)
    transport = proxy_for(kind)(make_transport(kind, store, clock=clock), recorder=recorder)
    hooks = MetricsHooks()
    worker = make_worker(
        kind,
        transport,
        handler,
        visibility=30.0,
        hard_timeout=0.05,
        hooks=hooks,
        retry=RetryPolicy(base=5.0, jitter=0),
    )
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(run(worker)))
    thread.start()
    try:
        if kind == "sync":
            _wait_until(lambda: hooks.unstoppable == 1, "the thread was reported unstoppable")
            assert recorder.count("nack") == 0  # not while the thread runs
            held = queue.group("g0")
            assert held is not None
            assert held.state == "leased"
            gate.set()  # the thread returns: now the nack
        recorder.wait_done("nack")
        [nack] = recorder.kwargs("nack")
        assert isinstance(nack["error"], TimeoutError)
        assert "hard_timeout (0.05s)" in str(nack["error"])
        assert nack["delay"] == 5.0  # the retry policy's delay for attempt 1
        parked = queue.group("g0")
        assert parked is not None
        assert (parked.state, parked.head_attempts) == ("parked", 1)
        assert parked.last_error is not None
        assert parked.last_error.type == "TimeoutError"
        assert "hard_timeout (0.05s)" in parked.last_error.message
        clock.advance(5.0)
    finally:
        gate.set()
        thread.join(20)
    [report] = result
    assert (report.timed_out, report.acked) == (1, 1)
    [second] = seen
    assert second is not None
    assert second.head_attempts == 2
    assert second.last_error is not None
    assert second.last_error.type == "TimeoutError"


def _wait_until(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.002)


def _hanging(kind: str, gate: threading.Event, started: threading.Event) -> Any:
    def sync_handler(event: Event) -> None:
        started.set()
        gate.wait(20)

    async def async_handler(event: Event) -> None:
        started.set()
        await asyncio.sleep(20)

    return sync_handler if kind == "sync" else async_handler


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_given_back_at_shutdown_is_released_not_counted(kind: str) -> None:
    """An immediate stop: the asyncio handler is cancelled and its message released (back at
    once, its attempt not counted). A handler in a thread cannot be stopped: its lease is
    kept, the group held, until it returns, and its own outcome is settled (here an ack)."""
    store = MemoryStore()
    queue = _queue(store)
    recorder = Recorder()
    gate, started = threading.Event(), threading.Event()
    transport = proxy_for(kind)(make_transport(kind, store), recorder=recorder)
    hooks = MetricsHooks()
    worker = make_worker(kind, transport, _hanging(kind, gate, started), hooks=hooks)
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(run(worker, stop_when_idle=False)))
    thread.start()
    try:
        assert started.wait(10)
        worker.stop(graceful=False)
        if kind == "sync":
            _wait_until(lambda: hooks.unstoppable == 1, "the thread was reported unstoppable")
            info = queue.group("g0")
            assert info is not None
            assert info.state == "leased"  # nobody else can take the group meanwhile
            assert queue.claim() is None
            assert thread.is_alive()  # run() waits for the thread
            gate.set()
        thread.join(10)
    finally:
        gate.set()
    [report] = result
    assert recorder.count("nack") == 0
    if kind == "sync":
        assert (report.acked, report.released) == (1, 0)
        assert queue.group("g0") is None  # done
        return
    assert report.released == 1
    assert recorder.count("release") == 1
    info = queue.group("g0")
    assert info is not None
    assert (info.state, info.head_attempts, info.lease_holder) == ("ready", 0, None)
    lease = queue.claim()
    assert lease is not None
    assert lease.attempt == 1  # the released delivery did not count


@pytest.mark.parametrize("kind", KINDS)
def test_stop_worker_releases_its_message_without_counting_it(kind: str) -> None:
    from pgque.core import ConfigurationError

    store = MemoryStore()
    queue = _queue(store)

    def handler(event: Event) -> None:
        raise StopWorker(ConfigurationError("cannot work like this"))

    with pytest.raises(ConfigurationError):
        run_handler(kind, store, handler)
    info = queue.group("g0")
    assert info is not None
    assert (info.state, info.head_attempts, info.last_error) == ("ready", 0, None)


def _meeting(kind: str, holders: list[str | None], queue: InMemoryTransport) -> Any:
    """A handler that waits until two leases are out at once, then notes who holds its group."""
    barrier = threading.Barrier(2, timeout=10)

    def sync_handler(event: Event, lease: Lease) -> None:
        barrier.wait()
        info = queue.group(lease.group_id)
        holders.append(None if info is None else info.lease_holder)

    arrived: list[int] = []
    both = asyncio.Event()

    async def async_handler(event: Event, lease: Lease) -> None:
        arrived.append(1)
        if len(arrived) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 10)
        info = queue.group(lease.group_id)
        holders.append(None if info is None else info.lease_holder)

    return sync_handler if kind == "sync" else async_handler


@pytest.mark.parametrize("kind", KINDS)
def test_every_claim_names_its_holder_host_pid_slot(kind: str) -> None:
    store = MemoryStore()
    queue = _queue(store, groups=2)
    holders: list[str | None] = []
    handler = _meeting(kind, holders, queue)
    worker = make_worker(kind, make_transport(kind, store), handler, concurrency=2)
    report = run(worker)
    assert report.acked == 2
    assert sorted(h or "" for h in holders) == [f"{HOST_PID}:0", f"{HOST_PID}:1"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_batch_claim_names_its_holder_too(kind: str) -> None:
    store = MemoryStore()
    queue = _queue(store, groups=3)
    recorder = Recorder()
    holders: list[str | None] = []

    def handler(event: Event, lease: Lease) -> None:
        info = queue.group(lease.group_id)
        holders.append(None if info is None else info.lease_holder)

    report = run_handler(
        kind,
        store,
        handler,
        batch_size=3,
        wrap=lambda t: proxy_for(kind)(t, recorder=recorder),
    )
    assert report.acked == 3
    assert holders == [f"{HOST_PID}:0"] * 3
    assert {kwargs["holder"] for kwargs in recorder.kwargs("claim_many")} == {f"{HOST_PID}:0"}


def test_a_long_host_name_is_cut_to_fit_a_holder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "h" * 300)
    label = holder_label(7)
    assert len(label) == 200
    assert label.endswith(f":{os.getpid()}:7")
    assert label.startswith("hhh")
