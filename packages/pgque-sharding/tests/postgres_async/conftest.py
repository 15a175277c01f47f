"""The conformance suite on the sharded layer over three PostgreSQL primaries (asyncio).

Three throwaway clusters (the plugin's ``postgres_shard_urls``); each test's sharded queue
has one sub-queue on each, purged at teardown. ``nox -s conformance-sharded-postgres``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest_asyncio

from pgque.conformance import AsyncTransportFactory
from pgque.conformance.sharded import sharded_async_factory
from pgque.core import AsyncTransport
from pgque.postgres_async import AsyncPostgresTransport


@pytest_asyncio.fixture
async def async_transport_factory(
    postgres_shard_urls: list[str],
) -> AsyncIterator[AsyncTransportFactory]:
    """Open sharded transports, one AsyncPostgresTransport per primary (each installs the
    schema on first use: idempotent); purge and close them."""
    shard_dsns = postgres_shard_urls
    opened: list[AsyncPostgresTransport] = []
    queues: dict[str, list[str]] = {dsn: [] for dsn in shard_dsns}

    def shard_on(dsn: str) -> AsyncTransportFactory:
        async def amake(**options: Any) -> AsyncTransport:
            options.setdefault("min_size", 1)
            options.setdefault("max_size", 2)
            transport = await AsyncPostgresTransport.from_dsn(dsn, **options)
            opened.append(transport)
            queues[dsn].append(transport.queue)
            return transport

        return amake

    yield sharded_async_factory([shard_on(dsn) for dsn in shard_dsns])
    for transport in opened:
        await transport.close()
    for dsn, names in queues.items():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            for queue in set(names):
                await AsyncPostgresTransport(conn, queue=queue, setup=False).purge()
