"""A stop at a forced moment never breaks a group: a claim in flight when the worker stops is
given back, a lease that arrives already dead is never started, and the report adds up.

Each race is forced, not hoped for: the transport's reply is held until the test has seen the
worker reach the point it wants (the stop requested, the slot gone), then let through."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from _worker_helpers import KINDS, adds_up, make_transport, make_worker, run

from pgque.conformance.held import HeldReplies, held_replies
from pgque.core import Event, InMemoryTransport, MemoryStore, WorkerReport

pytestmark = [pytest.mark.timeout(30), pytest.mark.parametrize("kind", KINDS)]


def _held(kind: str, store: MemoryStore, delay: float | None = None) -> HeldReplies:
    return held_replies(make_transport(kind, store), delay)


def _publish(store: MemoryStore, groups: int) -> InMemoryTransport:
    queue = InMemoryTransport(store=store)
    for g in range(groups):
        queue.publish(f"g{g:02d}", Event(kind="k", data={"g": g}))
    return queue


def _run_in_thread(worker: Any) -> tuple[threading.Thread, list[WorkerReport]]:
    result: list[WorkerReport] = []
    thread = threading.Thread(target=lambda: result.append(run(worker, stop_when_idle=False)))
    thread.start()
    return thread, result


def _wait_until(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.002)


def test_leases_a_call_brings_back_after_an_immediate_stop_are_released(kind: str) -> None:
    """The slots wait on a claim; the stop lands while it is out; the slots give up waiting;
    then the claim's reply arrives with leases nobody will run: they are released at once
    (uncounted), not left leased until their visibility ends (where expiry would count)."""
    store = MemoryStore()
    queue = _publish(store, 12)
    transport = _held(kind, store)
    tokens: list[str] = []

    def handler(event: Event, lease: Any) -> None:
        tokens.append(lease.token)

    worker = make_worker(kind, transport, handler, concurrency=4, visibility=600)
    thread, result = _run_in_thread(worker)
    assert transport.entered.wait(10)  # the claim leased on the server; its reply is held
    worker.stop(graceful=False)
    _wait_until(lambda: worker._run is None or worker._run.busy == 0, "every slot gave up")
    transport.let_through()
    thread.join(15)
    assert not thread.is_alive()
    report = result[0]
    # The held leases never ran and were given back; another call's may have run first.
    assert transport.held_leases
    assert not {lease.token for lease in transport.held_leases} & set(tokens)
    assert report.released == report.claimed - report.acked >= len(transport.held_leases)
    assert adds_up(report), report
    stats = queue.stats()
    assert (stats.in_flight, stats.messages) == (0, 12 - report.acked)
    lease = queue.claim()
    assert lease is not None
    assert lease.attempt == 1  # the release did not count


def test_a_lease_that_arrives_past_its_visibility_is_never_started(kind: str) -> None:
    """The claim's reply takes longer than the lease lasts: by the worker's own clock,
    measured from when the claim was sent, the lease is dead on arrival (another holder may
    run the message by now), so its handler never starts; it is given back (fenced), and the
    message runs once, on a later lease."""
    store = MemoryStore()
    queue = _publish(store, 1)
    transport = _held(kind, store, delay=1.5)
    tokens: list[str] = []

    def handler(event: Event, lease: Any) -> None:
        tokens.append(lease.token)

    worker = make_worker(kind, transport, handler, visibility=1.0)
    report = run(worker)
    [dead] = transport.held_leases
    assert dead.token not in tokens, tokens  # never started
    assert len(tokens) == 1, tokens  # the message ran once, on a fresh lease
    assert report.acked == 1
    assert report.released + report.lost == 1, report  # the dead lease, given back or gone
    assert adds_up(report), report
    assert queue.stats().messages == 0


@pytest.mark.parametrize("seed", range(6))
def test_the_report_adds_up_and_no_group_stays_leased_after_any_stop(kind: str, seed: int) -> None:
    """Stops at moments drawn at random (graceful or not, early or late, with handlers of
    random lengths): whatever the moment, every claimed lease is accounted for once in the
    report, and after run() no group is left leased by this worker."""
    rng = random.Random(seed)
    store = MemoryStore()
    queue = _publish(store, 40)
    lengths = {f"g{g:02d}": rng.choice([0.0, 0.002, 0.01, 0.03]) for g in range(40)}

    def handler(event: Event, lease: Any) -> None:
        time.sleep(lengths[lease.group_id])

    worker = make_worker(
        kind, make_transport(kind, store), handler, concurrency=4, prefetch=8, visibility=600
    )
    thread, result = _run_in_thread(worker)
    time.sleep(rng.uniform(0.0, 0.15))
    worker.stop(graceful=rng.random() < 0.5)
    thread.join(15)
    assert not thread.is_alive()
    report = result[0]
    assert adds_up(report), report
    assert report.lost == 0, report
    stats = queue.stats()
    assert stats.in_flight == 0, (report, stats)
    assert stats.messages == 40 - report.acked, (report, stats)
