"""Connections, retries, options and error wrapping of the blocking transport."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pgque.conformance import FakeClock
from pgque.conformance.servers.postgres import DelayedProxy
from pgque.core import (
    ConfigurationError,
    ConnectionLost,
    Event,
    InvalidInput,
    PgqueError,
    connect,
)
from pgque.postgres import PostgresTransport
from pgque.postgres._options import split_url

Make = Callable[..., PostgresTransport]
DEAD = "postgresql://pgque:s3cret-pw@127.0.0.1:1/nothing"


def test_from_dsn_retries_while_the_server_starts(postgres_url: str) -> None:
    with DelayedProxy(postgres_url, delay=1.0) as proxy:
        start = time.monotonic()
        transport = PostgresTransport.from_dsn(proxy.url, queue="retry", timeout=15, max_size=1)
        try:
            assert time.monotonic() - start >= 0.9
            assert transport.stats().messages >= 0
        finally:
            transport.close()


def test_from_dsn_gives_up_after_the_timeout_without_leaking_the_password() -> None:
    start = time.monotonic()
    with pytest.raises(ConnectionLost) as caught:
        PostgresTransport.from_dsn(DEAD, timeout=1)
    assert time.monotonic() - start < 5
    assert "s3cret-pw" not in str(caught.value)
    assert "***" in str(caught.value)
    assert isinstance(caught.value.__cause__, psycopg.Error)


def test_repr_masks_the_password() -> None:
    transport = PostgresTransport(DEAD)
    assert "s3cret-pw" not in repr(transport)
    kv = PostgresTransport("host=127.0.0.1 port=1 password=s3cret-pw")
    assert "s3cret-pw" not in repr(kv)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.publish("g", Event(kind="x"), priority=5),
        lambda t: t.publish("g", Event(kind="x"), priority=-1),
        lambda t: t.publish("g", Event(kind="x"), priority=True),
        lambda t: t.publish_many([("g", Event(kind="x"))], priority=9),
        lambda t: t.claim(min_priority=5),
        lambda t: t.claim_many(0),
        lambda t: t.claim(visibility=-1),
        lambda t: t.publish("", Event(kind="x")),
        lambda t: t.unblock(""),
        lambda t: t.redrive(["x"]),
        lambda t: t.dead_letters(0),
    ],
)
def test_bad_input_is_refused_before_any_io(call: Callable[[PostgresTransport], object]) -> None:
    # The DSN is dead: any I/O would raise ConnectionLost, not InvalidInput.
    transport = PostgresTransport(DEAD, timeout=0.5)
    with pytest.raises(InvalidInput):
        call(transport)


def test_a_killed_connection_raises_connection_lost(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        transport = PostgresTransport(conn, queue="killed")
        assert transport.stats().messages >= 0
        with psycopg.connect(postgres_url, autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(ConnectionLost) as caught:
            transport.stats()
        assert isinstance(caught.value.__cause__, psycopg.Error)


def test_a_failed_statement_raises_pgque_error(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        transport = PostgresTransport(conn, queue="failed")
        transport.stats()
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
        # The caller's transaction is aborted: pgque reports it as its own error type.
        with pytest.raises(PgqueError) as caught:
            transport.stats()
        assert not isinstance(caught.value, ConnectionLost)
        assert isinstance(caught.value.__cause__, psycopg.Error)


def test_leases_are_judged_by_the_server_clock(
    transport_factory: Make,
    raw: psycopg.Connection[tuple[object, ...]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seed computed lease times on the client; a client clock an hour off broke them."""
    transport = transport_factory()
    transport.publish("g", Event(kind="x"))
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)
    lease = transport.claim(visibility=30)
    monkeypatch.undo()
    assert lease is not None
    row = raw.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    assert abs(lease.expires_at - (float(str(row[0])) + 30)) < 5


def test_an_injected_clock_is_used_exactly(transport_factory: Make) -> None:
    clock = FakeClock(start=1_900_000_000.0)
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="x"))
    lease = transport.claim(visibility=30)
    assert lease is not None
    assert lease.expires_at == 1_900_000_030.0
    assert transport.stats().in_flight == 1
    clock.advance(31)
    assert transport.stats().in_flight == 0


def test_injected_pool_and_connection_work(transport_factory: Make, postgres_url: str) -> None:
    queue = transport_factory().queue  # purged at teardown
    with ConnectionPool(postgres_url, min_size=1, max_size=2, open=True) as pool:
        with PostgresTransport(pool, queue=queue) as transport:
            transport.publish("g", Event(kind="x"))
        assert not pool.closed  # the transport never closes what it was given
    with psycopg.connect(postgres_url) as conn:  # not autocommit: each call commits
        transport = PostgresTransport(conn, queue=queue)
        lease = transport.claim()
        assert lease is not None
        assert transport.ack(lease)
        transport.close()
        assert not conn.closed


def test_connect_reads_options_from_the_url(postgres_url: str, transport_factory: Make) -> None:
    queue = transport_factory().queue
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}queue={queue}&max_size=2&min_size=1&setup=false&timeout=5"
    url += "&application_name=pgque_test&max_attempts=3&on_exhausted=block"
    with connect(url) as transport:
        assert transport.queue == queue
        transport.publish("g", Event(kind="x"))
        assert transport.stats().messages == 1
    with pytest.raises(ConfigurationError):
        connect(postgres_url, bogus=1)
    with pytest.raises(ConfigurationError):
        connect(f"{postgres_url}{sep}setup=maybe")


def test_a_refusal_that_cannot_change_is_not_retried(postgres_url: str) -> None:
    sep = "&" if "?" in postgres_url else "?"
    start = time.monotonic()
    with pytest.raises(ConnectionLost, match="no_such_setting"):
        connect(f"{postgres_url}{sep}options=-c%20no_such_setting%3D1&timeout=20")
    assert time.monotonic() - start < 5


def test_libpq_options_with_spaces_reach_the_server(
    postgres_url: str, transport_factory: Make
) -> None:
    queue = transport_factory().queue
    sep = "&" if "?" in postgres_url else "?"
    with connect(f"{postgres_url}{sep}queue={queue}&options=-c%20synchronous_commit%3Doff") as q:
        q.publish("g", Event(kind="x"))
        assert q.stats().messages == 1


def test_split_url_keeps_libpq_parameters() -> None:
    dsn, options = split_url(
        "postgresql://u@/db?host=/tmp/s&queue=q&max_size=3&sslmode=disable",
        {"queue": "q", "max_size": "3", "sslmode": "disable", "host": "/tmp/s"},
    )
    assert dsn == "postgresql://u@/db?host=%2Ftmp%2Fs&sslmode=disable"
    spaced, _ = split_url("postgresql://u@h/db?options=-c%20a%3Db&queue=q", {"queue": "q"})
    assert spaced == "postgresql://u@h/db?options=-c%20a%3Db"
    assert options == {"queue": "q", "max_size": 3}
