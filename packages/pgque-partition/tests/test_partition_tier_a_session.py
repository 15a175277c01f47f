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
from _partition_support import fresh_queue
from psycopg_pool import ConnectionPool

from pgque.core.errors import ConfigurationError
from pgque.core.models import Event
from pgque.core.worker import RetryPolicy
from pgque.partition import (
    AsyncPartitionConsumer,
    Exclusive,
    KeyContext,
    KeyedPublisher,
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
    """Two slots on one key: the first handler holds its critical section until the second
    slot has met the held lock (and dropped its event); never two inside at once."""
    for _ in range(2):
        _publish(one_connection, "k")
    active = 0
    most = 0
    guard = threading.Lock()
    consumer: PartitionConsumer | None = None

    def handler(event: Event, ctx: KeyContext) -> None:
        nonlocal active, most
        with guard:
            active += 1
            most = max(most, active)
        try:
            assert consumer is not None
            for _ in range(3000):  # the other slot meets the held lock within 30 s
                if consumer.counts.dropped:
                    break
                threading.Event().wait(0.01)
        finally:
            with guard:
                active -= 1

    with ConnectionPool(postgres_url, min_size=2, max_size=2, kwargs={"autocommit": True}) as pool:
        consumer = PartitionConsumer(
            one_connection,
            handler,
            tier=Exclusive(contention="drop"),
            concurrency=2,
            lock_pool=pool,
            idle_backoff=(0.01, 0.05),
        )
        report = consumer.run(stop_when_idle=True)
    assert (consumer.counts.ran, consumer.counts.dropped, most) == (1, 1, 1)
    assert report.acked == 2


def _publish(transport: PostgresTransport, key: str) -> None:
    KeyedPublisher(transport, tier=Exclusive()).send("k", partition_key=key)


def test_a_lock_pool_smaller_than_the_concurrency_is_refused(
    one_connection: PostgresTransport, postgres_url: str
) -> None:
    """Each slot holds a pool connection for its lock transaction: a smaller pool would make a
    slot time out waiting for one (PoolTimeout), counted as a handler failure."""
    with ConnectionPool(postgres_url, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        with pytest.raises(ConfigurationError, match="lock_pool"):
            PartitionConsumer(
                one_connection, _noop, tier=Exclusive(), concurrency=2, lock_pool=pool
            )


def test_two_exclusive_consumers_on_one_connection_are_refused(
    one_connection: PostgresTransport,
) -> None:
    """Two consumers of concurrency 1 on one connection would share its session just as two
    slots would: the second is refused when it is built."""
    first = PartitionConsumer(one_connection, _noop, tier=Exclusive(), concurrency=1)
    with pytest.raises(ConfigurationError, match="another Exclusive consumer"):
        PartitionConsumer(one_connection, _noop, tier=Exclusive(), concurrency=1)
    # The Ordered tier takes no lock, so it may share the connection.
    PartitionConsumer(one_connection, _noop, concurrency=1)
    del first


def test_a_lock_session_conflict_stops_the_worker_and_spends_no_attempt(
    postgres_url: str,
) -> None:
    """A ConfigurationError from the lock layer (here: another lock transaction is open on the
    consumer's one connection) is not the handler's failure: the message is released, not
    retried to exhaustion and dead-lettered, and the worker stops with that error."""
    conn = psycopg.connect(postgres_url, autocommit=True)
    transport = PostgresTransport(conn, queue=fresh_queue(), max_attempts=2)
    backend = partition_backend(transport)
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with backend.key_lock("other", 30.0):
            inside.set()
            assert leave.wait(30)

    holder = threading.Thread(target=hold)
    try:
        _publish(transport, "k")
        holder.start()
        assert inside.wait(30)
        consumer = PartitionConsumer(
            transport,
            _noop,
            tier=Exclusive(),
            retry=RetryPolicy(base=0.0, jitter=0.0),
            idle_backoff=(0.01, 0.05),
        )
        with pytest.raises(ConfigurationError, match="one session"):
            consumer.run(stop_when_idle=True)
        leave.set()
        holder.join(30)
        assert consumer.counts.ran == 0
        assert transport.dead_letters() == []
        stats = transport.stats()
        assert (stats.messages, stats.in_flight, stats.parked) == (1, 0, 0)
    finally:
        leave.set()
        holder.join(30)
        transport.purge()
        transport.close()
        conn.close()


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
