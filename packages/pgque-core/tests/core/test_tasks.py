"""Tasks (pgque.core.App / AsyncApp): checked arguments, groups, keys, outcomes, both APIs."""

from __future__ import annotations

import asyncio
import time
from datetime import date, datetime, timezone
from typing import Any

import pydantic
import pytest

from pgque.core import (
    App,
    AsyncApp,
    AsyncInMemoryTransport,
    ConfigurationError,
    Event,
    InMemoryTransport,
    InvalidInput,
    Lease,
    Reject,
    Retry,
    RetryPolicy,
    Task,
    Unsupported,
)


class Address(pydantic.BaseModel):
    city: str
    zip_code: str


@pytest.fixture
def transport() -> InMemoryTransport:
    return InMemoryTransport(max_attempts=5)


def _drain(app: App) -> None:
    app.worker(idle_backoff=(0.001, 0.01)).run(stop_when_idle=True, install_signal_handlers=False)


# -- defer -------------------------------------------------------------------------------------


def test_defer_checks_the_arguments_before_anything_is_published(
    transport: InMemoryTransport,
) -> None:
    app = App(transport)

    @app.task(group="order-{order_id}")
    def charge(order_id: int, amount_cents: int, note: str = "") -> None: ...

    for bad in (
        {"order_id": "seven", "amount_cents": 1},  # not an int
        {"order_id": 7},  # missing
        {"order_id": 7, "amount_cents": 1, "colour": "red"},  # unknown
    ):
        with pytest.raises(InvalidInput, match="charge: invalid arguments"):
            charge.defer(**bad)
    assert transport.stats().messages == 0
    message_id = charge.defer(order_id=7, amount_cents=1250)
    [lease] = transport.claim_many(5)
    assert lease.message_id == message_id
    assert lease.group_id == "order-7"
    assert lease.event.kind == charge.kind
    assert charge.kind.endswith(
        "test_tasks.test_defer_checks_the_arguments_before_anything_is_published.<locals>.charge"
    )
    assert lease.event.data == {"order_id": 7, "amount_cents": 1250, "note": ""}


def test_a_worker_runs_the_tasks_with_their_arguments_converted(
    transport: InMemoryTransport,
) -> None:
    app = App(transport)
    seen: list[tuple[Any, ...]] = []

    @app.task(group=lambda customer, **_: f"customer-{customer}", kind="ship")
    def ship(customer: int, when: date, to: Address, lease: Lease) -> None:
        seen.append((customer, when, to, lease.group_id))

    @app.task(group="mail", kind="mail")
    def mail(text: str) -> None:
        seen.append((text,))

    ship.defer(customer=3, when="2026-12-24", to={"city": "Oslo", "zip_code": "0150"})
    mail.defer(text="hi")
    ship.defer(customer=3, when=date(2026, 12, 25), to=Address(city="Bergen", zip_code="5003"))
    _drain(app)
    assert seen[0] == (3, date(2026, 12, 24), Address(city="Oslo", zip_code="0150"), "customer-3")
    assert seen[-1][1] == date(2026, 12, 25)  # one group: in order
    assert ("hi",) in seen
    assert transport.stats().messages == 0
    # Calling the task runs it here; nothing is published.
    mail(text="direct")
    assert seen[-1] == ("direct",)
    assert transport.stats().messages == 0


def test_defer_many_publishes_every_call_in_order(transport: InMemoryTransport) -> None:
    app = App(transport)

    @app.task(group="g-{n}", kind="count")
    def count(n: int) -> None: ...

    ids = count.defer_many([{"n": i % 3} for i in range(9)])
    assert ids == sorted(ids)
    assert len(ids) == 9
    events = [lease.event for lease in transport.claim_many(3)]
    assert len({event.id for event in events}) == 3  # each call its own event id
    with pytest.raises(InvalidInput, match=r"count: invalid arguments: n: .* \(call 1 of 3\)"):
        count.defer_many([{"n": 1}, {"n": "x"}, {"m": 2}])  # checked first: nothing published
    assert transport.stats().messages == 9


def test_defer_many_converts_like_defer_and_keeps_each_calls_group(
    transport: InMemoryTransport,
) -> None:
    app = App(transport)

    @app.task(group="day-{day}", kind="report")
    def report(day: date, scale: float = 1.0) -> None: ...

    report.defer_many([{"day": "2026-12-01"}, {"day": date(2026, 12, 2), "scale": 2}])
    report.defer(day="2026-12-03", scale=3)
    events = sorted((lease.group_id, lease.event.data) for lease in transport.claim_many(5))
    assert events == [
        ("day-2026-12-01", {"day": "2026-12-01", "scale": 1.0}),
        ("day-2026-12-02", {"day": "2026-12-02", "scale": 2.0}),
        ("day-2026-12-03", {"day": "2026-12-03", "scale": 3.0}),
    ]


def test_delay_at_and_priority_pass_through() -> None:
    clock = [1_000.0]
    transport = InMemoryTransport(clock=lambda: clock[0])
    app = App(transport)

    @app.task(group="g", kind="later", priority=1)
    def later() -> None: ...

    later.defer(delay=30)
    [scheduled] = transport.scheduled()
    assert scheduled.due_at == pytest.approx(1_030.0)
    now = time.time()
    later.defer(at=datetime.fromtimestamp(now + 3_600, tz=timezone.utc))
    later.defer(at=now + 60)
    assert len(transport.scheduled()) == 3
    with pytest.raises(InvalidInput, match="aware"):
        later.defer(at=datetime(2030, 1, 1))
    with pytest.raises(InvalidInput, match="not both"):
        later.defer(delay=1, at=now)
    later.defer(priority=3)  # the call's priority over the task's
    assert (transport.group("g") or pytest.fail("no group")).priority == 3

    @app.task(group="h", kind="soon", priority=2)
    def soon() -> None: ...

    soon.defer()  # the task's priority
    assert (transport.group("h") or pytest.fail("no group")).priority == 2


def test_a_fairness_key_rule_puts_each_call_under_its_key(transport: InMemoryTransport) -> None:
    app = App(transport)

    @app.task(group="file-{path}", fairness_key="tenant-{tenant}", kind="scan")
    def scan(tenant: int, path: str) -> None: ...

    scan.defer_many([{"tenant": 1, "path": "a"}, {"tenant": 2, "path": "b"}])
    assert (transport.group("file-a") or pytest.fail("no group")).fairness_key == "tenant-1"
    assert (transport.group("file-b") or pytest.fail("no group")).fairness_key == "tenant-2"


def test_a_dedup_key_publishes_a_repeat_within_its_window_once() -> None:
    clock = [1_000.0]
    transport = InMemoryTransport(clock=lambda: clock[0])
    app = App(transport)

    @app.task(group="invoice-{invoice}", kind="send_invoice")
    def send_invoice(invoice: int) -> None: ...

    first = send_invoice.defer(invoice=7, dedup_key="invoice-7-v1", dedup_ttl=60)
    again = send_invoice.defer(invoice=7, dedup_key="invoice-7-v1", dedup_ttl=60)
    assert again == first  # the first defer's id; nothing published
    other = send_invoice.defer(invoice=7, dedup_key="invoice-7-v2")
    assert other != first
    assert transport.stats().messages == 2
    clock[0] += 61  # the window is over: the key publishes again
    assert send_invoice.defer(invoice=7, dedup_key="invoice-7-v1", dedup_ttl=60) not in (
        first,
        other,
    )
    assert transport.stats().messages == 3


def test_a_dedup_key_is_checked_and_refused_where_it_cannot_work(
    transport: InMemoryTransport,
) -> None:
    app = App(transport)

    @app.task(group="g-{n}", kind="plain")
    def plain(n: int) -> None: ...

    @app.task(group="g-{n}", fairness_key="tenant", kind="keyed")
    def keyed(n: int) -> None: ...

    with pytest.raises(InvalidInput, match="dedup_ttl needs a dedup_key"):
        plain.defer(n=1, dedup_ttl=5)
    with pytest.raises(InvalidInput, match="dedup_key"):
        plain.defer(n=1, dedup_key="")
    with pytest.raises(InvalidInput, match="dedup_ttl"):
        plain.defer(n=1, dedup_key="k", dedup_ttl=0)
    with pytest.raises(InvalidInput, match="does not go with delay"):
        plain.defer(n=1, dedup_key="k", delay=5)
    with pytest.raises(InvalidInput, match="does not go with delay"):
        keyed.defer(n=1, dedup_key="k")
    assert transport.stats().messages == 0

    def takes_dedup_key(dedup_key: str) -> None: ...

    with pytest.raises(InvalidInput, match="dedup_key"):
        app.task(group="g")(takes_dedup_key)


@pytest.mark.asyncio
async def test_an_async_tasks_dedup_key_publishes_once() -> None:
    transport = AsyncInMemoryTransport()
    app = AsyncApp(transport)

    @app.task(group="user-{user}", kind="welcome")
    async def welcome(user: str) -> None: ...

    first = await welcome.defer_async(user="ada", dedup_key="welcome-ada")
    assert await welcome.defer_async(user="ada", dedup_key="welcome-ada") == first
    assert (await transport.stats()).messages == 1


# -- outcomes ----------------------------------------------------------------------------------


def test_a_tasks_max_attempts_dead_letters_it_with_the_error(transport: InMemoryTransport) -> None:
    app = App(transport)
    calls: list[int] = []

    @app.task(group="g", kind="flaky", max_attempts=2, retry=RetryPolicy(base=0, jitter=0))
    def flaky(lease: Lease) -> None:
        calls.append(lease.attempt)
        raise ValueError("boom")

    flaky.defer()
    _drain(app)
    assert calls == [1, 2]
    [dead] = transport.dead_letters()
    assert "max_attempts 2" in dead.reason
    assert "ValueError: boom" in dead.reason


def test_a_tasks_retry_policy_sets_the_delay(transport: InMemoryTransport) -> None:
    app = App(transport)

    @app.task(group="g", kind="slow", retry=RetryPolicy(base=120, jitter=0))
    def slow() -> None:
        raise RuntimeError("not yet")

    slow.defer()
    lease = transport.claim() or pytest.fail("nothing to claim")
    with pytest.raises(Retry) as raised:
        app(lease.event, lease)  # the app is the worker's handler
    assert raised.value.delay == 120
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_reject_and_a_message_that_does_not_fit_are_dead_lettered(
    transport: InMemoryTransport,
) -> None:
    app = App(transport)

    @app.task(group="g", kind="strict")
    def strict(n: int) -> None:
        if n < 0:
            raise Reject("negative")

    strict.defer(n=-1)
    transport.publish("g", Event(kind="strict", data={"n": "not a number"}))  # a raw producer
    _drain(app)
    reasons = sorted(d.reason for d in transport.dead_letters())
    assert reasons[0] == "negative"
    assert "do not fit" in reasons[1]


def test_tasks_and_raw_events_share_a_queue(transport: InMemoryTransport) -> None:
    app = App(transport)
    seen: list[int] = []

    @app.task(group="g", kind="add")
    def add(n: int) -> None:
        seen.append(n)

    transport.publish("g", Event(kind="add", data={"n": 5}))
    transport.publish("g", Event(kind="other", data={}))
    _drain(app)
    assert seen == [5]
    [dead] = transport.dead_letters()
    assert "'other'" in dead.reason
    assert "'add'" in dead.reason


# -- refusals ----------------------------------------------------------------------------------


def test_functions_and_options_that_cannot_work_are_refused(transport: InMemoryTransport) -> None:
    app = App(transport)

    def takes_args(*items: int) -> None: ...

    def takes_delay(delay: float) -> None: ...

    def positional(a: int, /) -> None: ...

    def plain(a: int) -> None: ...

    for function in (takes_args, takes_delay, positional):
        with pytest.raises(InvalidInput):
            app.task(group="g")(function)
    with pytest.raises(InvalidInput, match="not among its arguments"):
        app.task(group="g-{b}")(plain)
    with pytest.raises(InvalidInput, match="max_attempts"):
        app.task(group="g", max_attempts=0)(plain)
    app.task(group="g", kind="plain")(plain)
    with pytest.raises(InvalidInput, match="already has a task"):
        app.task(group="g", kind="plain")(plain)
    with pytest.raises(InvalidInput):
        App(42)  # type: ignore[arg-type]


def test_a_group_rule_that_fails_or_gives_no_str_is_an_error(transport: InMemoryTransport) -> None:
    app = App(transport)

    @app.task(group=lambda n, **_: n, kind="bad")
    def bad(n: int) -> None: ...

    with pytest.raises(InvalidInput, match="must give a str"):
        bad.defer(n=1)
    assert transport.stats().messages == 0


# -- asyncio -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_async_app_defers_and_runs_async_tasks() -> None:
    transport = AsyncInMemoryTransport()
    app = AsyncApp(transport)
    done: list[str] = []

    @app.task(group="user-{user}", kind="greet")
    async def greet(user: str) -> None:
        await asyncio.sleep(0)
        done.append(user)

    assert isinstance(greet, Task)
    with pytest.raises(ConfigurationError, match="defer_async"):
        greet.defer(user="x")
    await greet.defer_async(user="ada")
    await greet.defer_many_async([{"user": "bob"}, {"user": "cy"}])
    worker = app.async_worker(idle_backoff=(0.001, 0.01))
    await worker.run(stop_when_idle=True, install_signal_handlers=False)
    assert sorted(done) == ["ada", "bob", "cy"]


def test_a_blocking_apps_task_refuses_defer_async(transport: InMemoryTransport) -> None:
    app = App(transport)

    @app.task(group="g", kind="k")
    def k() -> None: ...

    with pytest.raises(ConfigurationError, match=r"k\.defer"):
        asyncio.run(k.defer_async())


def test_an_app_from_a_url_connects_on_first_use_and_closes() -> None:
    with App("memory://tasks-url", queue="jobs") as app:

        @app.task(group="g", kind="noop")
        def noop() -> None: ...

        noop.defer()
        assert app.transport.queue == "jobs"
        assert app.transport.stats().messages == 1
    assert app.url == "memory://tasks-url"


def test_a_task_taking_connection_stops_a_worker_without_settle_in(
    transport: InMemoryTransport,
) -> None:
    app = App(transport)

    @app.task(group="g", kind="tx")
    def tx(connection: object) -> None: ...

    tx.defer()
    with pytest.raises(Unsupported, match="settle_in"):
        app.worker().run(stop_when_idle=True, install_signal_handlers=False)
    assert transport.stats().messages == 1  # released, not failed


def test_a_task_taking_connection_must_match_the_apps_api() -> None:
    app = AsyncApp(AsyncInMemoryTransport())

    def blocking(connection: object) -> None: ...

    with pytest.raises(InvalidInput, match="async def"):
        app.task(group="g")(blocking)
