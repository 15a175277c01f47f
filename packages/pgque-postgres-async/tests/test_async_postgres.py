"""The asyncio transport's own behaviour: lazy connect, retries, sources, transactional publish,
parallel claims and error wrapping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from pgque.conformance.servers.postgres import DelayedProxy
from pgque.core import (
    AsyncTransport,
    ConnectionLost,
    Event,
    InvalidInput,
    PgqueError,
    connect_async,
)
from pgque.postgres_async import AsyncPostgresTransport

pytestmark = pytest.mark.asyncio

AMake = Callable[..., Awaitable[AsyncPostgresTransport]]
DEAD = "postgresql://pgque:s3cret-pw@127.0.0.1:1/nothing"


async def test_connect_async_returns_at_once_and_connects_on_first_use(
    postgres_url: str, async_transport_factory: AMake
) -> None:
    queue = (await async_transport_factory()).queue
    sep = "&" if "?" in postgres_url else "?"
    transport = connect_async(f"{postgres_url}{sep}queue={queue}&max_size=2")
    assert isinstance(transport, AsyncPostgresTransport)
    assert isinstance(transport, AsyncTransport)
    try:
        await transport.publish("g", Event(kind="x"))  # opens the pool here
        assert (await transport.stats()).messages == 1
    finally:
        await transport.close()
    async with connect_async(f"{postgres_url}{sep}queue={queue}") as again:
        lease = await again.claim()
        assert lease is not None
        assert await again.ack(lease)


async def test_from_dsn_retries_while_the_server_starts(postgres_url: str) -> None:
    with DelayedProxy(postgres_url, delay=1.0) as proxy:
        start = time.monotonic()
        transport = await AsyncPostgresTransport.from_dsn(
            proxy.url, queue="retry", timeout=15, max_size=1
        )
        try:
            assert time.monotonic() - start >= 0.9
            assert (await transport.stats()).messages >= 0
        finally:
            await transport.close()


async def test_from_dsn_gives_up_after_the_timeout_without_leaking_the_password() -> None:
    start = time.monotonic()
    with pytest.raises(ConnectionLost) as caught:
        await AsyncPostgresTransport.from_dsn(DEAD, timeout=1)
    assert time.monotonic() - start < 5
    assert "s3cret-pw" not in str(caught.value)
    assert isinstance(caught.value.__cause__, psycopg.Error)


async def test_bad_priority_is_refused_before_any_io() -> None:
    transport = AsyncPostgresTransport(DEAD, timeout=0.5)
    with pytest.raises(InvalidInput):
        await transport.publish("g", Event(kind="x"), priority=5)
    with pytest.raises(InvalidInput):
        await transport.publish_many([("g", Event(kind="x"))], priority=-1)
    with pytest.raises(InvalidInput):
        await transport.claim(min_priority=7)
    with pytest.raises(InvalidInput):
        await transport.claim_many(0)


async def test_transactional_publish_commit_and_rollback(
    postgres_url: str, async_transport_factory: AMake
) -> None:
    transport = await async_transport_factory()
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        async with conn.transaction(force_rollback=True):
            await transport.publish("g", Event(kind="dropped"), connection=conn)
            assert (await transport.stats()).messages == 0
        assert (await transport.stats()).messages == 0
        kept = Event(kind="kept")
        async with conn.transaction():
            await transport.publish_many([("g", kept)], connection=conn)
            assert (await transport.stats()).messages == 0
    lease = await transport.claim()
    assert lease is not None
    assert lease.event == kept
    with pytest.raises(InvalidInput):
        await transport.publish("g", kept, connection=object())


async def test_concurrent_tasks_claim_distinct_groups_in_parallel(
    async_transport_factory: AMake,
) -> None:
    transport = await async_transport_factory(max_size=4)
    await transport.publish_many([(f"g{i}", Event(kind="x")) for i in range(40)])
    leases = await asyncio.gather(*(transport.claim() for _ in range(40)))
    groups = [lease.group_id for lease in leases if lease is not None]
    assert sorted(groups) == sorted(f"g{i}" for i in range(40))
    results = await asyncio.gather(*(transport.ack(lease) for lease in leases if lease))
    assert all(results)


async def test_injected_pool_and_connection_work(
    postgres_url: str, async_transport_factory: AMake
) -> None:
    queue = (await async_transport_factory()).queue
    async with AsyncConnectionPool(postgres_url, min_size=1, max_size=2, open=False) as pool:
        async with AsyncPostgresTransport(pool, queue=queue) as transport:
            await transport.publish("g", Event(kind="x"))
        assert not pool.closed
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        transport = AsyncPostgresTransport(conn, queue=queue)
        lease = await transport.claim()
        assert lease is not None
        assert await transport.ack(lease)
        await transport.close()
        assert not conn.closed


async def test_a_killed_connection_raises_connection_lost(postgres_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        transport = AsyncPostgresTransport(conn, queue="killed")
        await transport.stats()
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as kill:
            await kill.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(ConnectionLost):
            await transport.stats()


async def test_a_failed_statement_raises_pgque_error(postgres_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        transport = AsyncPostgresTransport(conn, queue="failed")
        await transport.stats()
        with pytest.raises(psycopg.errors.DivisionByZero):
            await conn.execute("SELECT 1 / 0")
        with pytest.raises(PgqueError) as caught:
            await transport.stats()
        assert not isinstance(caught.value, ConnectionLost)
