"""The suite's own machinery: the fake clock, the harness and the program helpers."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pgque.conformance import FakeClock
from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance._harness_sync import REAL_UNIT_ENV, Harness
from pgque.conformance._program import (
    error_view,
    event_for,
    group_view,
    lease_view,
    scheduled_view,
    stats_view,
)
from pgque.core import (
    AsyncInMemoryTransport,
    AsyncTransport,
    Capabilities,
    ErrorInfo,
    GroupInfo,
    InMemoryTransport,
    MemoryStore,
    QueueStats,
    ScheduledMessage,
    Transport,
)


class _WallClockTransport(InMemoryTransport):
    """An in-memory transport that pretends it cannot take an injected clock."""

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(injected_clock=False)


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock(start=100.0)
    assert clock() == 100.0
    assert clock.advance(2.5) == 102.5
    assert clock() == 102.5


def test_fake_clock_is_thread_safe() -> None:
    clock = FakeClock(start=0.0)

    def bump() -> None:
        for _ in range(1000):
            clock.advance(1.0)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock() == 4000.0


def test_harness_with_injected_clock() -> None:
    store = MemoryStore()
    seen: list[dict[str, Any]] = []

    def make(**options: Any) -> Transport:
        seen.append(dict(options))
        options.setdefault("queue", f"q{len(seen)}")
        return InMemoryTransport(store=store, **options)

    harness = Harness(make)
    with pytest.raises(RuntimeError):
        _ = harness.capabilities
    transport = harness.open()
    assert harness.fake_time
    assert harness.unit == 10.0
    start = harness.now()
    harness.advance(5.0)
    assert harness.now() == start + 5.0 == harness.clock()
    second = harness.make(queue=transport.queue)
    assert seen[1] == {"queue": transport.queue, "clock": harness.clock}
    assert second.queue == transport.queue
    harness.require("priorities")


def test_harness_without_injected_clock_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REAL_UNIT_ENV, "0.05")
    seen: list[dict[str, Any]] = []

    def make(**options: Any) -> Transport:
        seen.append(dict(options))
        options.pop("clock", None)
        return _WallClockTransport(**options)

    harness = Harness(make)
    harness.open()
    assert not harness.fake_time
    assert harness.unit == 0.05
    harness.make()
    assert "clock" not in seen[1]
    before = time.monotonic()
    harness.advance(0.05)
    assert time.monotonic() - before >= 0.04
    assert abs(harness.now() - time.time()) < 1.0
    with pytest.raises(pytest.skip.Exception, match="injected_clock"):
        harness.require("injected_clock")


@pytest.mark.asyncio
async def test_async_harness() -> None:
    store = MemoryStore()

    async def amake(**options: Any) -> AsyncTransport:
        options.setdefault("queue", "q")
        return AsyncInMemoryTransport(store=store, **options)

    harness = AsyncHarness(amake)
    transport = await harness.open()
    assert harness.fake_time
    await harness.advance(3.0)
    assert harness.now() == harness.clock()
    assert (await harness.make(queue="q")).queue == transport.queue


def test_program_views() -> None:
    assert event_for(3, 1).id == "e3-1"
    assert event_for(3).id != event_for(4).id
    assert lease_view(None) is None
    stats = QueueStats(
        groups=1,
        messages=1,
        in_flight=0,
        parked=1,
        blocked=0,
        dead_letters=0,
        oldest_age_s=1.23456,
        next_resume_at=5.00049,
        paused=2,
        scheduled=3,
        next_due_at=7.00051,
    )
    assert stats_view(stats) == (1, 1, 0, 1, 0, 2, 0, 1.235, 5.0, 3, 7.001)
    later = ScheduledMessage(
        id=9, group_id="g", due_at=8.00049, kind="k", priority=2, enqueued_at=1.0004
    )
    assert scheduled_view(later) == ("g", "k", 2, 8.0, 1.0)  # not the id: stores number apart
    assert group_view(None) is None
    error = ErrorInfo(type="error", message="m", at=1.00049)
    assert error_view(error) == ("error", "m", None, 1.0)
    info = GroupInfo(
        group_id="g",
        state="parked",
        depth=2,
        priority=1,
        head_message_id=17,
        head_enqueued_at=2.00049,
        head_attempts=1,
        resume_at=9.00051,
        last_error=error,
    )
    assert group_view(info) == (
        "g",
        "parked",
        2,
        1,
        False,
        2.0,
        1,
        None,
        None,
        9.001,
        ("error", "m", None, 1.0),
    )
