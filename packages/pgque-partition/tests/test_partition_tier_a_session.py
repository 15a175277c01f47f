"""Tier A on PostgreSQL needs one database session per lock holder: its lock is a
transaction-scoped advisory lock, re-entrant within a session. A transport that sits on ONE
injected psycopg connection would run two slots' lock transactions on that one session (the
second a savepoint of the first), so both would "hold" the key. That configuration is refused
when the consumer is built, and a second lock transaction on a connection that already carries
one is refused when it begins; a lock pool or a pooled transport gives every holder its own
session.

The interleavings are forced: the first holder waits inside its critical section on an event
while the second tries to enter.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from conftest import fresh_queue
from psycopg_pool import ConnectionPool

from pgque.core.errors import ConfigurationError
from pgque.core.models import Event
from pgque.partition import (
    AsyncPartitionConsumer,
    Exclusive,
    KeyContext,
    PartitionConsumer,
    partition_backend,
    partition_backend_async,
)
from pgque.postgres import PostgresTransport
from pgque.postgres_async import AsyncPostgresTransport


@pytest.fixture
def one_connection(postgres_url: str) -> Iterator[PostgresTransport]:
    """A blocking transport on one injected autocommit connection (a fresh queue)."""
    conn = psycopg.connect(postgres_url, autocommit=True)
    transport = PostgresTransport(conn, queue=fresh_queue())
    try:
        yield transport
    finally:
        transport.purge()
        transport.close()
        conn.close()


@pytest_asyncio.fixture
async def one_async_connection(postgres_url: str) -> AsyncIterator[AsyncPostgresTransport]:
    """An asyncio transport on one injected autocommit connection (a fresh queue)."""
    conn = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
    transport = AsyncPostgresTransport(conn, queue=fresh_queue())
    try:
        yield transport
    finally:
        await transport.purge()
        await transport.close()
        await conn.close()


def _noop(event: Event, ctx: KeyContext) -> None:
    pass


def test_concurrency_above_one_on_one_connection_is_refused(
    one_connection: PostgresTransport,
) -> None:
    with pytest.raises(ConfigurationError, match="lock_pool"):
        PartitionConsumer(one_connection, _noop, tier=Exclusive(), concurrency=2)
    # One slot, or a lock pool giving each slot its own session, is fine.
    PartitionConsumer(one_connection, _noop, tier=Exclusive(), concurrency=1)
    # The Ordered tier takes no lock: nothing to refuse.
    PartitionConsumer(one_connection, _noop, concurrency=4)


def test_a_lock_pool_makes_concurrency_safe_on_one_connection(
    one_connection: PostgresTransport, postgres_url: str
) -> None:
    with ConnectionPool(postgres_url, min_size=2, max_size=2, kwargs={"autocommit": True}) as pool:
        PartitionConsumer(one_connection, _noop, tier=Exclusive(), concurrency=2, lock_pool=pool)


@pytest.mark.asyncio
async def test_async_concurrency_above_one_on_one_connection_is_refused(
    one_async_connection: AsyncPostgresTransport,
) -> None:
    with pytest.raises(ConfigurationError, match="lock_pool"):
        AsyncPartitionConsumer(one_async_connection, _noop, tier=Exclusive(), concurrency=2)
    AsyncPartitionConsumer(one_async_connection, _noop, tier=Exclusive(), concurrency=1)


@pytest.mark.parametrize("second_key", ["k", "other"])
def test_a_second_holder_on_the_same_session_cannot_enter(
    one_connection: PostgresTransport, second_key: str
) -> None:
    """The first holder waits inside its critical section; a second lock transaction on the
    same connection (another consumer on the same transport, say) is refused instead of
    becoming a savepoint that "holds" the key too."""
    backend = partition_backend(one_connection)
    inside = threading.Event()
    leave = threading.Event()
    grants: list[Any] = []

    def first() -> None:
        with backend.key_lock("k", 30.0) as grant:
            grants.append(grant)
            inside.set()
            assert leave.wait(30)

    holder = threading.Thread(target=first)
    holder.start()
    try:
        assert inside.wait(30)
        assert grants[0] is not None
        with pytest.raises(ConfigurationError, match="one session"):
            with backend.key_lock(second_key, 30.0) as grant:
                grants.append(grant)
        assert len(grants) == 1  # the second never entered
    finally:
        leave.set()
        holder.join(30)
    # Once the first transaction ended, the connection takes a lock transaction again.
    with backend.key_lock("k", 30.0) as grant:
        assert grant is not None


@pytest.mark.asyncio
async def test_async_second_holder_on_the_same_session_cannot_enter(
    one_async_connection: AsyncPostgresTransport,
) -> None:
    backend = partition_backend_async(one_async_connection)
    inside = asyncio.Event()
    leave = asyncio.Event()
    entered: list[Any] = []

    async def first() -> None:
        async with backend.key_lock("k", 30.0) as grant:
            entered.append(grant)
            inside.set()
            await leave.wait()

    holder = asyncio.ensure_future(first())
    try:
        await asyncio.wait_for(inside.wait(), 30)
        with pytest.raises(ConfigurationError, match="one session"):
            async with backend.key_lock("k", 30.0) as grant:
                entered.append(grant)
        assert len(entered) == 1
    finally:
        leave.set()
        await asyncio.wait_for(holder, 30)
    async with backend.key_lock("k", 30.0) as grant:
        assert grant is not None
