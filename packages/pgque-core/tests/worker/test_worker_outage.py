"""A running worker rides out an outage of its real server (stopped, then started again): it
handles what was published before and after, logs one line when the connection is lost and
one when it is back, and its transport reconnects by itself.

The servers are throwaway ones on their own ports (never the shared services).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pgque.conformance.servers.restartable import ThrowawayPostgres, ThrowawayRedis
from pgque.core import AsyncWorker, Event, Worker, connect, connect_async

pytestmark = pytest.mark.timeout(90)

#: The worker's reconnect backoff in these tests: short, so an outage spans many attempts.
BACKOFF = (0.05, 0.2)
LOST = "lost the connection to the server"
BACK = "connection back after"


@pytest.fixture(scope="module")
def postgres() -> Iterator[ThrowawayPostgres]:
    server = ThrowawayPostgres()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[ThrowawayRedis]:
    server = ThrowawayRedis()
    server.start()
    yield server
    server.stop()


class Watch(logging.Handler):
    """Keep the worker's records; let a test wait for the first "lost" line."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.lost = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if LOST in record.getMessage():
            self.lost.set()

    def lines(self, text: str) -> list[str]:
        return [r.getMessage() for r in self.records if text in r.getMessage()]


@pytest.fixture
def watch() -> Iterator[Watch]:
    handler = Watch()
    logger = logging.getLogger("pgque.worker")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old)


def _name(event: Event) -> str:
    data = event.data
    assert isinstance(data, dict)
    return str(data["name"])


class Handled:
    """The events a handler saw, with a wait for a given one."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.changed = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self.changed:
            self.seen.setdefault(_name(event), time.monotonic())
            self.changed.notify_all()

    def wait_for(self, *names: str, timeout: float = 30) -> float:
        """Wait until every one of *names* was handled; return when the last one was."""
        with self.changed:
            assert self.changed.wait_for(lambda: set(names) <= set(self.seen), timeout)
            return max(self.seen[name] for name in names)


def _publish(url: str, queue: str, *names: str) -> None:
    with connect(url, queue=queue) as producer:
        for name in names:
            producer.publish(f"g-{name}", Event(kind="k", data={"name": name}))


def _outage(
    server: ThrowawayPostgres | ThrowawayRedis,
    watch: Watch,
    url: str,
    queue: str,
    handled: Handled,
    down_s: float,
    during: Callable[[], None] | None = None,
) -> float:
    """Publish, stop the server for *down_s* seconds once the worker noticed, start it,
    publish again; return how long after the start the last message was handled."""
    _publish(url, queue, "before-1", "before-2")
    handled.wait_for("before-1", "before-2")
    _publish(url, queue, "just-before")  # may be claimed, or not, when the server stops
    server.down()
    stopped = time.monotonic()
    assert watch.lost.wait(15), "the worker did not notice the outage"
    if during is not None:
        during()
    time.sleep(max(down_s - (time.monotonic() - stopped), 0.0))
    server.up()
    started = time.monotonic()
    _publish(url, queue, "after-1", "after-2")
    last = handled.wait_for("just-before", "after-1", "after-2")
    return last - started


def _check_log(watch: Watch) -> None:
    lost, back = watch.lines(LOST), watch.lines(BACK)
    assert len(lost) == 1, lost
    assert len(back) == 1, back
    assert "retrying every <=0.2 s" in lost[0]
    assert "\n" not in lost[0]
    failed = int(back[0].split(" s, ")[1].split()[0])
    assert failed >= 2  # several attempts failed meanwhile, each at DEBUG only
    assert len(watch.lines("failed again")) >= failed - 1
    assert not watch.lines("backing off")  # the old line per attempt


def _run_sync(worker: Worker) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def target() -> None:
        outcome["report"] = worker.run(install_signal_handlers=False)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def test_sync_worker_rides_out_a_postgres_outage_longer_than_its_pool_timeout(
    postgres: ThrowawayPostgres, watch: Watch
) -> None:
    url = postgres.url
    # A pool timeout of 1 s: every call waiting for a connection fails after 1 s, many times
    # over; the worker must not give up. 8.5 s down: psycopg_pool's own reconnect pauses
    # (1, 2, 4, 8 s...) would have it try next at about 15 s.
    transport = connect(url, queue="outage-pg", timeout=1.0)
    handled = Handled()
    worker = Worker(transport, handled, concurrency=2, reconnect_backoff=BACKOFF)
    thread, outcome = _run_sync(worker)
    try:
        late = _outage(postgres, watch, url, "outage-pg", handled, down_s=8.5)
    finally:
        worker.stop()
        thread.join(30)
        transport.close()
    assert not thread.is_alive()
    assert outcome["report"].acked >= 5
    assert late < 3.0  # the pool reconnected within seconds (about 1 s; 5 s without the fix)
    _check_log(watch)


def test_sync_worker_rides_out_a_redis_outage_and_its_lease_renewals_count(
    redis_server: ThrowawayRedis, watch: Watch
) -> None:
    url = redis_server.url
    # No retries inside the transport: each call fails at once, renewals included.
    transport = connect(url, queue="outage-redis", retries=0)
    handled = Handled()
    slow_started, slow_release = threading.Event(), threading.Event()

    def handler(event: Event) -> None:
        if _name(event) == "slow":
            slow_started.set()
            assert slow_release.wait(30)
        handled(event)

    # visibility 4 s: its lease is renewed every 2 s, so renewals fail during the outage.
    worker = Worker(transport, handler, concurrency=2, visibility=4.0, reconnect_backoff=BACKOFF)
    thread, outcome = _run_sync(worker)
    try:
        _publish(url, "outage-redis", "slow")
        assert slow_started.wait(10)
        _outage(redis_server, watch, url, "outage-redis", handled, down_s=3.0)
        slow_release.set()
        handled.wait_for("slow")
    finally:
        slow_release.set()
        worker.stop()
        thread.join(30)
        transport.close()
    assert not thread.is_alive()
    assert outcome["report"].acked >= 6
    _check_log(watch)
    failures = [r.getMessage() for r in watch.records if "extend failed" in r.getMessage()]
    assert failures  # the renewals failed in the same outage (one lost line above)


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_async_worker_rides_out_an_outage(
    backend: str, request: pytest.FixtureRequest, watch: Watch
) -> None:
    server: ThrowawayPostgres | ThrowawayRedis = request.getfixturevalue(
        "postgres" if backend == "postgres" else "redis_server"
    )
    url, queue = server.url, f"outage-async-{backend}"
    handled = Handled()
    options = {"timeout": 1.0} if backend == "postgres" else {"retries": 0}
    # PostgreSQL: down longer than the pool's reconnect_timeout, as in the sync test.
    down_s = 8.5 if backend == "postgres" else 3.0

    async def main() -> float:
        transport = connect_async(url, queue=queue, **options)
        worker = AsyncWorker(transport, handled, concurrency=2, reconnect_backoff=BACKOFF)
        task = asyncio.ensure_future(worker.run(install_signal_handlers=False))
        try:
            # The test's own blocking steps (stop, start, publish) run in a thread.
            return await asyncio.to_thread(_outage, server, watch, url, queue, handled, down_s)
        finally:
            worker.stop()
            reports.append(await asyncio.wait_for(task, 30))
            await transport.close()

    reports: list[Any] = []
    late = asyncio.run(main())
    assert reports[0].acked >= 5
    if backend == "postgres":
        assert late < 3.0  # the asyncio pool starts over too (see the sync test)
    _check_log(watch)
