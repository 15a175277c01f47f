"""The Scheduler and AsyncScheduler on the in-memory transport, with an injected clock:
exactly once across schedulers, missed-tick policies, lost connections, stopping."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from pgque.core import (
    AsyncInMemoryTransport,
    AsyncScheduler,
    ConfigurationError,
    ConnectionLost,
    InMemoryTransport,
    InvalidInput,
    MemoryStore,
    PublishedTick,
    Schedule,
    ScheduleEntry,
    Scheduler,
)
from pgque.core.scheduling import TICK_HEADER

pytestmark = pytest.mark.timeout(30)

#: 2026-01-01T00:00:00Z
BASE = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = BASE) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _schedule(**options: Any) -> Schedule:
    values: dict[str, Any] = {
        "name": "beat",
        "cron": "* * * * * *",
        "group_id": "beats",
        "kind": "beat",
    }
    return Schedule([ScheduleEntry(**{**values, **options})])


def _drain(transport: InMemoryTransport) -> list[float]:
    """Claim and ack everything; return the ticks of the events, in delivery order."""
    ticks: list[float] = []
    while (lease := transport.claim()) is not None:
        ticks.append(datetime.fromisoformat(lease.event.headers[TICK_HEADER]).timestamp())
        assert transport.ack(lease)
    return ticks


def test_run_once_publishes_the_due_tick_once() -> None:
    clock = Clock(BASE + 0.25)
    transport = InMemoryTransport(clock=clock)
    scheduler = Scheduler(transport, _schedule(data={"n": 1}, priority=2))
    assert scheduler.run_once() == []  # a new entry starts at the next tick (BASE + 1)
    clock.now = BASE + 1.0
    (published,) = scheduler.run_once()
    assert published == PublishedTick("beat", BASE + 1, published.message_id)
    assert scheduler.run_once() == []  # nothing new is due
    assert transport.last_tick("beat") == BASE + 1
    lease = transport.claim()
    assert lease is not None
    assert lease.group_id == "beats"
    assert lease.priority == 2
    assert lease.event.kind == "beat"
    assert lease.event.data == {"n": 1}
    assert lease.event.headers[TICK_HEADER] == "2026-01-01T00:00:01+00:00"


def test_a_tick_at_the_start_itself_is_due() -> None:
    transport = InMemoryTransport(clock=Clock())
    scheduler = Scheduler(transport, _schedule())
    assert [p.tick for p in scheduler.run_once(BASE)] == [BASE]


def test_two_schedulers_publish_each_tick_exactly_once() -> None:
    store, clock = MemoryStore(), Clock(BASE)
    first = Scheduler(InMemoryTransport(store=store, clock=clock), _schedule(), name="a")
    second = Scheduler(InMemoryTransport(store=store, clock=clock), _schedule(), name="b")
    by: dict[str, list[PublishedTick]] = {"a": [], "b": []}
    for step in range(40):  # 20 s in half-second steps, the two in turn and in both orders
        clock.now = BASE + step / 2
        pair = (first, second) if step % 3 else (second, first)
        for scheduler in pair:
            by[scheduler.name] += scheduler.run_once()
    published = sorted(by["a"] + by["b"], key=lambda p: p.tick)
    ticks = [p.tick for p in published]
    assert ticks == [BASE + s for s in range(20)]  # each tick once, none missing
    assert by["a"]
    assert by["b"]
    assert len({p.message_id for p in published}) == 20
    assert _drain(InMemoryTransport(store=store)) == ticks
    assert first.run_once(BASE + 19.5) == second.run_once(BASE + 19.5) == []


def test_skip_after_downtime_publishes_only_the_latest_missed_tick() -> None:
    store, clock = MemoryStore(), Clock(BASE)
    transport = InMemoryTransport(store=store, clock=clock)
    schedule = _schedule(cron="0 * * * *")  # hourly
    assert len(Scheduler(transport, schedule).run_once(BASE)) == 1
    clock.now = BASE + 5 * 3600 + 120  # down for five hours
    published = Scheduler(transport, schedule).run_once()
    assert [p.tick for p in published] == [BASE + 5 * 3600]
    assert _drain(transport) == [BASE, BASE + 5 * 3600]


def test_catch_up_after_downtime_publishes_each_missed_tick_up_to_the_maximum() -> None:
    store, clock = MemoryStore(), Clock(BASE)
    transport = InMemoryTransport(store=store, clock=clock)
    schedule = _schedule(cron="0 * * * *", missed="catch_up", max_catch_up=3)
    Scheduler(transport, schedule).run_once(BASE)
    clock.now = BASE + 2 * 3600 + 120
    assert [p.tick for p in Scheduler(transport, schedule).run_once()] == [
        BASE + 3600,
        BASE + 7200,
    ]
    clock.now = BASE + 12 * 3600
    hours = [BASE + h * 3600 for h in (10, 11, 12)]  # the latest three of ten missed
    assert [p.tick for p in Scheduler(transport, schedule).run_once()] == hours
    assert _drain(transport) == [BASE + h * 3600 for h in (0, 1, 2, 10, 11, 12)]


def test_late_ticks_within_grace_are_not_missed() -> None:
    clock = Clock(BASE)
    transport = InMemoryTransport(clock=clock)
    scheduler = Scheduler(transport, _schedule(), grace=5)
    scheduler.run_once()
    clock.now = BASE + 4  # a slow wake-up: four ticks at once, all on time
    assert [p.tick for p in scheduler.run_once()] == [BASE + s for s in (1, 2, 3, 4)]
    clock.now = BASE + 30  # an outage: ticks more than 5 s late were missed
    assert [p.tick for p in scheduler.run_once()] == [BASE + s for s in range(25, 31)]


def test_a_restarted_scheduler_goes_on_after_the_recorded_tick() -> None:
    store, clock = MemoryStore(), Clock(BASE)
    transport = InMemoryTransport(store=store, clock=clock)
    Scheduler(transport, _schedule()).run_once(BASE)
    clock.now = BASE + 3
    restarted = Scheduler(InMemoryTransport(store=store, clock=clock), _schedule())
    assert [p.tick for p in restarted.run_once()] == [BASE + 1, BASE + 2, BASE + 3]


class _Flaky:
    """A memory transport whose publish_tick loses the connection *failures* times first
    (after the tick took effect when *after_commit*: the reply was lost, not the call)."""

    def __init__(self, inner: InMemoryTransport, failures: int, after_commit: bool) -> None:
        self._inner = inner
        self.failures = failures
        self._after_commit = after_commit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def publish_tick(self, *args: Any, **kwargs: Any) -> int | None:
        if self.failures:
            self.failures -= 1
            if self._after_commit:
                self._inner.publish_tick(*args, **kwargs)
            raise ConnectionLost("server closed the connection")
        return self._inner.publish_tick(*args, **kwargs)


@pytest.mark.parametrize("after_commit", [False, True])
def test_run_rides_out_lost_connections_one_line_each(
    after_commit: bool, caplog: pytest.LogCaptureFixture
) -> None:
    inner = InMemoryTransport()
    flaky = _Flaky(inner, failures=3, after_commit=after_commit)
    scheduler = Scheduler(flaky, _schedule(), reconnect_backoff=(0.01, 0.05))
    thread = threading.Thread(target=scheduler.run, kwargs={"install_signal_handlers": False})
    with caplog.at_level(logging.WARNING, logger="pgque.scheduler"):
        thread.start()
        deadline = time.monotonic() + 10
        while inner.stats().messages < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        scheduler.stop()
        thread.join(5)
    assert not thread.is_alive()
    assert flaky.failures == 0
    failures = [r for r in caplog.records if "publishing ticks failed" in r.getMessage()]
    assert len(failures) == 3
    assert all("ConnectionLost: server closed the connection" in r.getMessage() for r in failures)
    ticks = _drain(inner)
    assert len(ticks) >= 2
    assert ticks == sorted(set(ticks))


def test_run_sleeps_until_the_tick_and_stops_at_once() -> None:
    transport = InMemoryTransport()
    scheduler = Scheduler(transport, _schedule(cron="0 0 1 1 *"))  # yearly: it sleeps
    thread = threading.Thread(target=scheduler.run, kwargs={"install_signal_handlers": False})
    thread.start()
    deadline = time.monotonic() + 5
    while not scheduler.running and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    asked = time.monotonic()
    scheduler.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - asked < 0.5
    assert transport.stats().messages == 0


def test_run_publishes_every_second_on_the_wall_clock() -> None:
    transport = InMemoryTransport()
    scheduler = Scheduler(transport, _schedule())
    thread = threading.Thread(target=scheduler.run, kwargs={"install_signal_handlers": False})
    thread.start()
    deadline = time.monotonic() + 10
    while not scheduler.running and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(3.2)
    scheduler.stop()
    thread.join(5)
    ticks = _drain(transport)
    assert 2 <= len(ticks) <= 4  # 3.2 s of running (its first pass may come a little late)
    assert [b - a for a, b in itertools.pairwise(ticks)] == [1.0] * (len(ticks) - 1)


def test_stop_before_run_makes_it_return_at_once() -> None:
    scheduler = Scheduler(InMemoryTransport(), _schedule())
    scheduler.stop()
    started = time.monotonic()
    scheduler.run(install_signal_handlers=False)
    assert time.monotonic() - started < 0.5


def test_bad_arguments() -> None:
    transport = InMemoryTransport()
    with pytest.raises(InvalidInput, match="no entries"):
        Scheduler(transport, Schedule())
    with pytest.raises(InvalidInput, match=r"must be a pgque\.core\.Schedule"):
        Scheduler(transport, [])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="grace"):
        Scheduler(transport, _schedule(), grace=-1)
    with pytest.raises(ConfigurationError, match="has no publish_tick"):
        Scheduler(object(), _schedule())  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="now must be finite"):
        Scheduler(transport, _schedule()).run_once(float("nan"))


def test_async_scheduler_exactly_once_and_stop() -> None:
    async def main() -> None:
        store, clock = MemoryStore(), Clock(BASE)
        first = AsyncScheduler(AsyncInMemoryTransport(store=store, clock=clock), _schedule())
        second = AsyncScheduler(AsyncInMemoryTransport(store=store, clock=clock), _schedule())
        published: list[PublishedTick] = []
        for step in range(10):
            clock.now = BASE + step
            published += await second.run_once()
            published += await first.run_once()
        assert [p.tick for p in published] == [BASE + s for s in range(10)]
        sleeper = AsyncScheduler(AsyncInMemoryTransport(), _schedule(cron="0 0 1 1 *"))
        task = asyncio.create_task(sleeper.run(install_signal_handlers=False))
        await asyncio.sleep(0.2)
        assert sleeper.running
        sleeper.stop()
        await asyncio.wait_for(task, 1)
        assert not sleeper.running

    asyncio.run(main())


def test_the_clock_is_the_argument_else_the_transports_else_the_wall_clock() -> None:
    injected, own = Clock(BASE), Clock(BASE + 100)
    transport = InMemoryTransport(clock=injected)
    assert transport.clock is injected
    assert InMemoryTransport().clock is None
    assert Scheduler(transport, _schedule()).now() == BASE
    assert Scheduler(transport, _schedule(), clock=own).now() == BASE + 100
    assert abs(Scheduler(InMemoryTransport(), _schedule()).now() - time.time()) < 5
