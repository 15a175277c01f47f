"""Publishing, deferring and settling in Django's transactions, on real Django and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction

from pgque.core import Event
from pgque.core.errors import ConfigurationError, InvalidInput, LeaseLost
from pgque.core.models import Lease
from pgque.django import (
    DjangoApp,
    DjangoTransport,
    get_app,
    get_transport,
    psycopg_of,
    read_settings,
)

pytestmark = pytest.mark.usefixtures("django_url")


@pytest.fixture
def Payment(payments: Any) -> Any:
    """The tests' model (its table emptied around the test)."""
    return payments


Make = Callable[..., DjangoTransport]


class Boom(Exception):
    """What the tests raise to roll a block back."""


def _failing(block: AbstractContextManager[Any], body: Callable[[], object]) -> None:
    """Run *body* in *block*, then raise Boom in it (the block rolls back)."""
    with block:
        body()
        raise Boom


def _claim(transport: DjangoTransport) -> Lease:
    lease = transport.claim()
    assert lease is not None
    return lease


def test_publish_in_atomic_commits_with_the_block(fresh_queue: Make) -> None:
    q = fresh_queue()
    with transaction.atomic():
        q.publish("g", Event(kind="a"))
        # Not visible outside the transaction yet: the transport's own pool sees nothing.
        assert q.stats().messages == 0
    assert q.stats().messages == 1


def test_publish_in_atomic_rolls_back_with_the_block(fresh_queue: Make) -> None:
    q = fresh_queue()
    with pytest.raises(Boom):
        _failing(
            transaction.atomic(),
            lambda: q.publish_many([("g", Event(kind="a")), ("h", Event(kind="b"))]),
        )
    assert q.stats().messages == 0


def test_publish_in_a_rolled_back_savepoint_is_dropped(fresh_queue: Make) -> None:
    q = fresh_queue()
    with transaction.atomic():
        q.publish("g", Event(kind="kept"))
        with pytest.raises(Boom):
            _failing(transaction.atomic(), lambda: q.publish("g", Event(kind="dropped")))
    lease = _claim(q)
    assert lease.event.kind == "kept"
    assert q.ack(lease)
    assert q.claim() is None


def test_publish_outside_atomic_commits_at_once(fresh_queue: Make) -> None:
    q = fresh_queue()
    q.publish("g", Event(kind="a"))
    assert q.stats().messages == 1


def test_publish_on_another_alias_given_as_a_django_connection(fresh_queue: Make) -> None:
    q = fresh_queue()
    with pytest.raises(Boom):
        _failing(
            transaction.atomic(), lambda: q.publish("g", Event(kind="a"), connection=connection)
        )
    assert q.stats().messages == 0


def test_defer_joins_atomic(fresh_queue: Make, Payment: Any) -> None:
    app = DjangoApp(fresh_queue())

    @app.task(group="account-{account}")
    def pay(account: str, cents: int) -> None:
        Payment.objects.create(account=account, cents=cents)

    def view() -> None:
        Payment.objects.create(account="view", cents=1)
        pay.defer(account="acme", cents=500)

    with pytest.raises(Boom):
        _failing(transaction.atomic(), view)
    assert app.transport.stats().messages == 0
    assert Payment.objects.count() == 0

    with transaction.atomic():
        Payment.objects.create(account="view", cents=1)
        pay.defer_many([{"account": "acme", "cents": 500}, {"account": "zeta", "cents": 7}])
    assert app.transport.stats().messages == 2
    report = app.worker().run(stop_when_idle=True, install_signal_handlers=False)
    assert report.acked == 2
    rows = sorted(Payment.objects.values_list("account", "cents"))
    assert rows == [("acme", 500), ("view", 1), ("zeta", 7)]


def test_settle_in_commits_orm_writes_with_the_ack(fresh_queue: Make, Payment: Any) -> None:
    q = fresh_queue()
    q.publish("g", Event(kind="pay", data={"cents": 1250}))
    lease = _claim(q)
    with q.settle_in(lease) as tx:
        assert tx.connection is psycopg_of("default")
        Payment.objects.create(message_id=lease.message_id, account="a", cents=1250)
        # The transport's own connections see neither the row nor the ack yet.
        assert q.stats().in_flight == 1
    assert Payment.objects.get(message_id=lease.message_id).cents == 1250
    assert q.stats().messages == 0
    assert q.ack(lease)  # the worker's own ack after the block: answered from memory


def test_the_orms_own_transactions_work_inside_settle_in(fresh_queue: Make, Payment: Any) -> None:
    """Deletes (the ORM wraps them in atomic()), nested atomic() blocks (savepoints) and
    on_commit hooks behave in the block as in any atomic() block of Django's."""
    q = fresh_queue()
    Payment.objects.create(account="old", cents=1)
    q.publish("g", Event(kind="pay"))
    lease = _claim(q)
    committed: list[str] = []
    with q.settle_in(lease):
        Payment.objects.filter(account="old").delete()
        with transaction.atomic():
            Payment.objects.create(account="kept", cents=2)
        with pytest.raises(Boom):
            _failing(transaction.atomic(), lambda: Payment.objects.create(account="no", cents=3))
        transaction.on_commit(lambda: committed.append("hook"))
        assert committed == []
    assert committed == ["hook"]
    assert list(Payment.objects.values_list("account", flat=True)) == ["kept"]
    assert q.stats().messages == 0


def test_settle_in_rolls_orm_writes_back_with_the_settlement(
    fresh_queue: Make, Payment: Any
) -> None:
    q = fresh_queue()
    q.publish("g", Event(kind="pay"))
    lease = _claim(q)
    with pytest.raises(Boom):
        _failing(
            q.settle_in(lease),
            lambda: Payment.objects.create(message_id=lease.message_id, account="a", cents=1),
        )
    assert Payment.objects.count() == 0
    assert q.stats().in_flight == 1  # the lease is still held, unsettled
    assert q.nack(lease)
    again = _claim(q)
    assert again.attempt == 2


def test_settle_in_inside_an_open_atomic_commits_with_it(fresh_queue: Make, Payment: Any) -> None:
    q = fresh_queue()
    q.publish("g", Event(kind="pay"))
    lease = _claim(q)

    def outer() -> None:
        Payment.objects.create(account="outer", cents=1)
        with q.settle_in(lease, connection):
            Payment.objects.create(message_id=lease.message_id, account="a", cents=1)

    with pytest.raises(Boom):
        _failing(transaction.atomic(), outer)  # the outer block decides for both
    assert Payment.objects.count() == 0
    assert q.stats().in_flight == 1

    def nothing_before() -> None:  # the outer block has run no statement yet
        with q.settle_in(lease):
            Payment.objects.create(message_id=lease.message_id, account="a", cents=1)

    with pytest.raises(Boom):
        _failing(transaction.atomic(), nothing_before)
    assert Payment.objects.count() == 0
    assert q.stats().in_flight == 1
    with transaction.atomic():
        Payment.objects.create(account="outer", cents=1)
        with q.settle_in(lease) as tx:
            tx.nack(delay=60)
    assert q.stats().parked == 1
    assert Payment.objects.count() == 1


def test_settle_in_refuses_a_lost_lease_before_any_write(fresh_queue: Make, Payment: Any) -> None:
    q = fresh_queue()
    q.publish("g", Event(kind="pay"))
    lease = _claim(q)
    assert q.ack(lease)
    with pytest.raises(LeaseLost), q.settle_in(lease):
        Payment.objects.create(account="never", cents=1)
    assert Payment.objects.count() == 0
    assert not connection.in_atomic_block


def test_task_with_connection_writes_through_the_orm_in_its_transaction(
    fresh_queue: Make, Payment: Any
) -> None:
    app = DjangoApp(fresh_queue(max_attempts=2))
    calls: list[int] = []

    @app.task(group="account-{account}")
    def pay(account: str, cents: int, lease: Lease, connection: psycopg.Connection[Any]) -> None:
        calls.append(lease.attempt)
        assert connection is psycopg_of("default")
        Payment.objects.create(message_id=lease.message_id, account=account, cents=cents)
        if lease.attempt == 1:
            raise Boom  # rolls the row back; the retry writes it once

    pay.defer(account="acme", cents=500)
    worker = app.worker(retry=_no_delay())
    report = worker.run(stop_when_idle=True, install_signal_handlers=False)
    assert calls == [1, 2]
    assert report.acked == 1
    assert list(Payment.objects.values_list("account", "cents")) == [("acme", 500)]
    assert app.transport.stats().messages == 0


def test_defer_with_a_delay_joins_atomic(fresh_queue: Make) -> None:
    app = DjangoApp(fresh_queue())

    @app.task(group="later")
    def later(n: int) -> None:
        del n

    with pytest.raises(Boom):
        _failing(transaction.atomic(), lambda: later.defer(n=1, delay=60))
    assert app.transport.stats().scheduled == 0
    with transaction.atomic():
        later.defer(n=2, delay=60)
    assert app.transport.stats().scheduled == 1
    assert app.transport.claim() is None  # not due yet


def test_an_async_task_is_refused_by_the_worker(fresh_queue: Make) -> None:
    app = DjangoApp(fresh_queue())

    @app.task(group="g")
    async def run_async() -> None:
        return None

    with pytest.raises(InvalidInput, match="AsyncWorker"):
        app.worker()


def test_project_app_and_settings() -> None:
    config = read_settings()
    assert get_transport().queue == config.queue
    assert get_app().transport is get_transport()
    import pgque_django_testapp.tasks

    import pgque.django

    assert pgque.django.app is get_app()
    assert pgque_django_testapp.tasks.pay.kind in get_app().tasks


def test_settings_are_checked(settings_override: Callable[..., Any]) -> None:
    with settings_override(PGQUE={"QUEUE": "x", "URL": "postgresql://"}):
        with pytest.raises(ConfigurationError, match="unknown keys"):
            read_settings()
    with settings_override(PGQUE={"DATABASE": "elsewhere"}):
        with pytest.raises(ConfigurationError, match=r"not a key of settings\.DATABASES"):
            DjangoTransport(database=read_settings().database)
    with settings_override(PGQUE={"OPTIONS": {"setup": True}}):
        with pytest.raises(ConfigurationError, match="migration"):
            read_settings()


def test_a_connection_of_another_kind_is_refused(fresh_queue: Make) -> None:
    q = fresh_queue()
    with pytest.raises(InvalidInput, match="connection must be"):
        q.publish("g", Event(kind="a"), connection=object())


def _no_delay() -> Any:
    from pgque.core.worker import RetryPolicy

    return RetryPolicy(base=0.01, max_delay=0.01, jitter=0.0)


@pytest.fixture
def settings_override() -> Callable[..., Any]:
    from django.test.utils import override_settings

    override: Callable[..., Any] = override_settings
    return override
