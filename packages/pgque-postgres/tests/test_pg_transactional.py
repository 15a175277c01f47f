"""publish(..., connection=conn) joins the caller's transaction (the transactional outbox)."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.orm import Session, scoped_session, sessionmaker

from pgque.core import Event, InvalidInput
from pgque.postgres import PostgresTransport

Make = Callable[..., PostgresTransport]


def test_rollback_drops_the_message(transport_factory: Make, postgres_url: str) -> None:
    transport = transport_factory()
    with psycopg.connect(postgres_url) as conn:
        with conn.transaction(force_rollback=True):
            conn.execute("CREATE TEMP TABLE orders (id int)")
            message_id = transport.publish("order-1", Event(kind="created"), connection=conn)
            assert message_id > 0
            # Not visible outside the transaction yet.
            assert transport.stats().messages == 0
    assert transport.stats().messages == 0
    assert transport.claim() is None


def test_commit_publishes_with_the_callers_writes(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    event = Event(kind="created", data={"order": 1})
    with psycopg.connect(postgres_url) as conn:
        with conn.transaction():
            transport.publish("order-1", event, connection=conn)
            ids = transport.publish_many(
                [("order-1", Event(kind="paid")), ("order-2", Event(kind="created"))],
                connection=conn,
            )
            assert len(ids) == 2
            assert transport.stats().messages == 0
    assert transport.stats().messages == 3
    lease = transport.claim()
    assert lease is not None
    assert lease.event == event


def test_publish_many_rolls_back_as_a_whole(transport_factory: Make, postgres_url: str) -> None:
    transport = transport_factory()
    with psycopg.connect(postgres_url) as conn:
        transport.publish_many([("a", Event(kind="x")), ("b", Event(kind="y"))], connection=conn)
        conn.rollback()
    assert transport.stats().messages == 0


def test_connection_must_be_a_psycopg_connection(transport_factory: Make) -> None:
    transport = transport_factory()
    with pytest.raises(InvalidInput):
        transport.publish("a", Event(kind="x"), connection=object())
    assert transport.stats().messages == 0


# -- SQLAlchemy sessions and connections on psycopg 3 -------------------------------------------


def _sqlalchemy_engine(postgres_url: str) -> sqlalchemy.Engine:
    """An engine on psycopg 3 whose connections open *postgres_url* (a libpq URL, a socket
    directory's too, which SQLAlchemy's own URL parsing would not decode)."""
    return sqlalchemy.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(postgres_url)
    )


def test_a_sqlalchemy_session_rolls_back_and_commits_the_publish(
    transport_factory: Make, postgres_url: str
) -> None:
    transport = transport_factory()
    engine = _sqlalchemy_engine(postgres_url)
    try:
        with Session(engine) as session:
            session.execute(sqlalchemy.text("CREATE TEMP TABLE orders (id int)"))
            session.execute(sqlalchemy.text("INSERT INTO orders VALUES (1)"))
            transport.publish("order-1", Event(kind="created"), connection=session)
            assert transport.stats().messages == 0  # inside the session's transaction
            session.rollback()
        assert transport.stats().messages == 0
        with Session(engine) as session, session.begin():
            transport.publish_many(
                [("order-2", Event(kind="created")), ("order-2", Event(kind="paid"))],
                connection=session,
            )
        assert transport.stats().messages == 2
        with engine.begin() as connection:  # a Connection in a transaction
            transport.publish("order-3", Event(kind="created"), connection=connection)
        assert transport.stats().messages == 3
        scoped = scoped_session(sessionmaker(engine))
        try:
            transport.publish("order-4", Event(kind="created"), connection=scoped)
            scoped.commit()
        finally:
            scoped.remove()
        assert transport.stats().messages == 4
    finally:
        engine.dispose()


def test_sqlalchemy_on_another_driver_is_refused(transport_factory: Make) -> None:
    transport = transport_factory()
    engine = sqlalchemy.create_engine("sqlite://")  # the standard library's driver
    try:
        with Session(engine) as session, pytest.raises(InvalidInput, match="psycopg 3"):
            transport.publish("a", Event(kind="x"), connection=session)
    finally:
        engine.dispose()
    assert transport.stats().messages == 0
