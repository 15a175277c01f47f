"""A transactional publish joins a SQLAlchemy AsyncSession / AsyncConnection on psycopg 3."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_scoped_session,
    async_sessionmaker,
    create_async_engine,
)

from pgque.core import Event, InvalidInput
from pgque.postgres_async import AsyncPostgresTransport

AMake = Callable[..., Awaitable[AsyncPostgresTransport]]


def _engine(postgres_url: str) -> sqlalchemy.Engine:
    """A blocking engine on psycopg 3 whose connections open *postgres_url* (a libpq URL, a
    socket directory's too, which SQLAlchemy's own URL parsing would not decode)."""
    return sqlalchemy.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(postgres_url)
    )


def _async_engine(postgres_url: str) -> AsyncEngine:
    """:func:`_engine` on asyncio."""

    async def connect() -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(postgres_url)

    return create_async_engine("postgresql+psycopg://", async_creator=connect)


@pytest.mark.asyncio
async def test_an_async_session_rolls_back_and_commits_the_publish(
    postgres_url: str, async_transport_factory: AMake
) -> None:
    transport = await async_transport_factory()
    engine = _async_engine(postgres_url)
    try:
        async with AsyncSession(engine) as session:
            await session.execute(sqlalchemy.text("CREATE TEMP TABLE orders (id int)"))
            await transport.publish("order-1", Event(kind="created"), connection=session)
            assert (await transport.stats()).messages == 0
            await session.rollback()
        assert (await transport.stats()).messages == 0
        async with AsyncSession(engine) as session, session.begin():
            await transport.publish_many(
                [("order-2", Event(kind="created")), ("order-2", Event(kind="paid"))],
                connection=session,
            )
        assert (await transport.stats()).messages == 2
        async with engine.begin() as connection:
            await transport.publish("order-3", Event(kind="created"), connection=connection)
        assert (await transport.stats()).messages == 3
        scoped = async_scoped_session(async_sessionmaker(engine), scopefunc=lambda: "one")
        try:
            await transport.publish("order-4", Event(kind="created"), connection=scoped)
            await scoped.commit()
        finally:
            await scoped.remove()
        assert (await transport.stats()).messages == 4
    finally:
        await engine.dispose()


@pytest.mark.asyncio
async def test_a_blocking_session_is_refused_by_the_asyncio_transport(
    postgres_url: str, async_transport_factory: AMake
) -> None:
    transport = await async_transport_factory()
    engine = _engine(postgres_url)
    try:
        with sqlalchemy.orm.Session(engine) as session, pytest.raises(InvalidInput):
            await transport.publish("a", Event(kind="x"), connection=session)
    finally:
        engine.dispose()
