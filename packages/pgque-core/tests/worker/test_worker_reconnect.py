"""Lost connections: the worker backs off, goes on with the same transport, loses nothing
and never acks a message twice."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from _worker_helpers import KINDS, Faults, Recorder, proxy_for, run_handler

from pgque.core import Event, InMemoryTransport, Lease, MemoryStore, MetricsHooks

pytestmark = [pytest.mark.timeout(30), pytest.mark.parametrize("kind", KINDS)]


def test_random_connection_losses_lose_nothing(kind: str) -> None:
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    expected = {(f"g{g}", i) for g in range(8) for i in range(5)}
    for i in range(5):
        for g in range(8):
            queue.publish(f"g{g}", Event(kind="k", data={"i": i}))
    faults, recorder, hooks = Faults(rate=0.2, seed=11), Recorder(), MetricsHooks()
    lock = threading.Lock()
    handled: dict[str, list[int]] = defaultdict(list)

    def handler(event: Event, lease: Lease) -> None:
        with lock:
            handled[lease.group_id].append(event.data["i"])  # type: ignore[arg-type, call-overload, index]

    report = run_handler(
        kind,
        store,
        handler,
        concurrency=3,
        visibility=0.3,
        hooks=hooks,
        wrap=lambda t: proxy_for(kind)(t, faults, recorder),
    )
    assert queue.stats().messages == 0
    assert {(g, i) for g, seq in handled.items() for i in seq} == expected  # nothing lost
    acked = recorder.successes("ack")
    assert len(acked) == len(expected)  # each message's ack took effect exactly once
    assert len({lease.message_id for lease in acked}) == len(expected)
    for seq in handled.values():  # redelivery repeats a message, never skips ahead
        firsts = list(dict.fromkeys(seq))
        assert firsts == sorted(firsts)
    assert faults.injected > 10
    assert report.errors == faults.injected == sum(hooks.errors.values())
    assert set(hooks.errors) == {"ConnectionLost"}


def test_an_outage_is_waited_out_with_bounded_backoff(kind: str) -> None:
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    queue.publish("g", Event(kind="k"))
    faults, recorder = Faults(), Recorder()
    faults.plan["claim"] = ["before"] * 6  # the server is down for six claims
    times: list[float] = []

    def handler(event: Event) -> None:
        times.append(time.monotonic())

    started = time.monotonic()
    report = run_handler(
        kind,
        store,
        handler,
        reconnect_backoff=(0.02, 0.08),
        wrap=lambda t: proxy_for(kind)(t, faults, recorder),
    )
    # steps 0.02 + 0.04 + 0.08 * 4 = 0.38 s, each wait jittered to half..all of its step
    assert 0.19 <= times[0] - started < 2.0
    assert (report.errors, report.acked) == (6, 1)
    assert recorder.count("claim") == 9  # six failed, one message, two empty (idle confirmed)


def test_a_lost_ack_is_retried_and_counted_once(kind: str) -> None:
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    queue.publish("g", Event(kind="k"))
    queue.publish("g", Event(kind="k"))
    faults, recorder = Faults(), Recorder()
    faults.plan["ack"] = ["before", "before"]  # ack fails twice, then goes through
    handled: list[int] = []

    def handler(event: Event, lease: Lease) -> None:
        handled.append(lease.message_id)

    report = run_handler(kind, store, handler, wrap=lambda t: proxy_for(kind)(t, faults, recorder))
    assert handled == [1, 2]  # the first message was not redelivered
    assert [lease.message_id for lease in recorder.successes("ack")] == [1, 2]
    assert (report.acked, report.errors, report.lost) == (2, 2, 0)


def test_an_ack_applied_but_unanswered_is_not_applied_twice(kind: str) -> None:
    store = MemoryStore()
    queue = InMemoryTransport(store=store)
    queue.publish("g", Event(kind="k"))
    queue.publish("g", Event(kind="k"))
    faults, recorder = Faults(), Recorder()
    faults.plan["ack"] = ["after"]  # applied, then the connection drops before the answer

    def handler(event: Event) -> None:
        pass

    # The ack went with the next claim, and that claim's answer was lost too: message 2 is
    # leased to nobody until its lease expires (0.5 s), then delivered again (attempt 2).
    report = run_handler(
        kind,
        store,
        handler,
        visibility=0.5,
        wrap=lambda t: proxy_for(kind)(t, faults, recorder),
    )
    acks: list[Any] = recorder.args("ack")
    assert [lease.message_id for lease in acks] == [1, 1, 2]  # retried: fenced, returns False
    assert [lease.message_id for lease in recorder.successes("ack")] == [1, 2]
    # the retry's False cannot tell "applied before" from "lease lost": reported lost
    assert (report.acked, report.lost) == (1, 1)
    assert queue.stats().messages == 0
