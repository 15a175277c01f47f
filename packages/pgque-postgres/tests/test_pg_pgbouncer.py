"""The pooler options (prepared_statements, listen_url), and the transport behind a real PgBouncer.

Each PgBouncer test starts its own (the plugin's ``pgbouncer_factory``: transaction pooling, in
front of the test server); the tests that need it skip when pgbouncer is not installed, except
in the ``conformance-pgbouncer`` nox session (which installs it or fails), where they fail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from urllib.parse import quote

import psycopg
import pytest

from pgque.conformance.servers.pgbouncer import PgBouncer
from pgque.core import ConfigurationError, Event, InvalidInput, connect
from pgque.postgres import PostgresTransport
from pgque.postgres._options import split_url

pytestmark = pytest.mark.timeout(60)

Make = Callable[..., PostgresTransport]


def _with(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


# -- the options ---------------------------------------------------------------------------


def test_prepared_statements_reads_as_a_boolean_from_the_url() -> None:
    url = "postgresql://u@h/db?queue=q&prepared_statements=off&sslmode=disable"
    dsn, options = split_url(url, {"queue": "q", "prepared_statements": "off"})
    assert dsn == "postgresql://u@h/db?sslmode=disable"
    assert options == {"queue": "q", "prepared_statements": False}
    with pytest.raises(ConfigurationError, match="prepared_statements must be a boolean"):
        connect("postgresql://u@h/db?prepared_statements=sometimes")


def test_prepared_statements_must_be_a_bool() -> None:
    with pytest.raises(InvalidInput, match="prepared_statements must be a bool"):
        PostgresTransport("postgresql://u@h/db", prepared_statements="off")  # type: ignore[arg-type]


def test_listen_url_travels_percent_encoded_and_leaves_the_dsn() -> None:
    listen = "postgresql://u:pw@direct:5432/db?application_name=l"
    url = f"postgresql://u:pw@bouncer:6432/db?queue=q&listen_url={quote(listen, safe='')}"
    dsn, options = split_url(url, {"queue": "q", "listen_url": listen})
    assert dsn == "postgresql://u:pw@bouncer:6432/db"
    assert options == {"queue": "q", "listen_url": listen}


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "postgresql://u:s3cret@h/db?queue=orders",  # a queue URL: libpq has no "queue"
        "not a connection string",
        42,
    ],
)
def test_a_bad_listen_url_is_refused_at_once_without_its_password(bad: object) -> None:
    with pytest.raises(InvalidInput, match="listen_url") as caught:
        PostgresTransport("postgresql://u@h/db", listen_url=bad)  # type: ignore[arg-type]
    assert "s3cret" not in str(caught.value)


def test_without_prepared_statements_nothing_is_prepared(postgres_url: str) -> None:
    # psycopg prepares a statement on its fifth run on one connection; on one injected
    # connection the session's pg_prepared_statements shows whether it did.
    counts = {}
    for prepared in (True, False):
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            transport = PostgresTransport(conn, queue="prep", prepared_statements=prepared)
            for _ in range(8):
                transport.stats()
            row = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
            counts[prepared] = row[0] if row else None
    assert counts == {True: 1, False: 0}


def test_opening_transports_prepares_nothing_either(postgres_url: str) -> None:
    # Every open reads the schema version on the connection: on one injected connection,
    # eight opens would prepare those reads if they went through psycopg's counting.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for _ in range(8):
            with PostgresTransport(conn, queue="prep_open", prepared_statements=False):
                pass  # opening reads the schema version
        rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    assert rows == []


def test_wait_for_messages_listens_on_listen_url(
    postgres_url: str, transport_factory: Make, raw: psycopg.Connection[tuple[object, ...]]
) -> None:
    name = f"pgque_listen_{time.monotonic_ns()}"
    consumer = transport_factory(listen_url=_with(postgres_url, f"application_name={name}"))
    producer = transport_factory(queue=consumer.queue)
    assert consumer.wait_for_messages(1.0) is True  # listening now
    row = raw.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
    ).fetchone()
    assert row == (1,)
    producer.publish("g", Event(kind="k"))
    assert consumer.wait_for_messages(10.0) is True


# -- behind a real PgBouncer (transaction pooling) ---------------------------------------------


@pytest.fixture
def through(pgbouncer_factory: Callable[..., PgBouncer]) -> Iterator[Make]:
    """Return ``make(**options)``: a transport (one client connection) through a PgBouncer of
    the test's own whose pool has one server connection, shared by every client in turn."""
    pgbouncer_url = pgbouncer_factory(pool_size=1).url
    opened: list[PostgresTransport] = []

    def make(**options: object) -> PostgresTransport:
        options.setdefault("min_size", 1)
        options.setdefault("max_size", 1)
        transport = PostgresTransport.from_dsn(pgbouncer_url, **options)  # type: ignore[arg-type]
        opened.append(transport)
        return transport

    yield make
    for transport in opened:
        transport.close()


def test_prepared_statements_break_behind_pgbouncer_with_a_clear_error(through: Make) -> None:
    # One client prepares psycopg's first statement on the bouncer's one idle server
    # connection; the next client gets that server connection and prepares the same name.
    first = through(queue="pb_prep")
    for _ in range(6):
        first.stats()
    second = through(queue="pb_prep")
    for _ in range(5):  # psycopg prepares a statement on its sixth run (prepare_threshold 5)
        second.stats()
    with pytest.raises(ConfigurationError, match=r"prepared_statements=off"):
        second.stats()


def test_without_prepared_statements_clients_share_server_connections(through: Make) -> None:
    transports = [through(queue="pb_noprep", prepared_statements=False) for _ in range(3)]
    for _ in range(8):
        for transport in transports:
            transport.publish("g", Event(kind="k"))
            assert transport.stats().messages >= 1
    lease = transports[0].claim()
    assert lease is not None
    assert transports[1].ack(lease)
    transports[2].purge()


def test_listen_through_pgbouncer_is_not_heard_and_listen_url_fixes_it(
    through: Make, postgres_url: str
) -> None:
    # In transaction mode the LISTEN's server connection goes back to the pool after its
    # statement: the notification reaches whichever client holds it then, not the listener.
    deaf = through(queue="pb_listen", prepared_statements=False)
    producer = through(queue="pb_listen", prepared_statements=False)
    assert deaf.wait_for_messages(1.0) is True  # the first call: "listening now"
    producer.publish("g", Event(kind="k"))
    assert deaf.wait_for_messages(0.5) is False  # never heard

    heard = through(queue="pb_listen", prepared_statements=False, listen_url=postgres_url)
    assert heard.wait_for_messages(1.0) is True
    producer.publish("g", Event(kind="k"))
    assert heard.wait_for_messages(10.0) is True
    producer.purge()
