"""Opening a transport survives a connection cut while it installs or checks the schema."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from pgque.postgres_async import AsyncPostgresTransport

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]

#: The advisory lock install_schema takes (shared-sql/queries.sql, install_lock).
INSTALL_LOCK = 7067717565


def _with_app_name(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


async def test_from_dsn_retries_a_connection_cut_during_setup(postgres_url: str) -> None:
    # A worker that starts while the server restarts (or a failover, or a pooler cutting it)
    # loses its first connection in the middle of the schema check: from_dsn must connect
    # again, as it does while the server starts, instead of failing the worker's start.
    name = f"pgque-setup-cut-{uuid.uuid4().hex[:8]}"
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(postgres_url, autocommit=True) as holder,
        await connect(postgres_url, autocommit=True) as killer,
    ):
        async with holder.transaction():
            await holder.execute("SELECT pg_advisory_xact_lock(%s)", (INSTALL_LOCK,))
            opening = asyncio.ensure_future(
                AsyncPostgresTransport.from_dsn(
                    _with_app_name(postgres_url, name), queue="t_setup_cut", timeout=20
                )
            )
            for _ in range(200):  # until the opener waits for the install lock
                cursor = await killer.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s AND wait_event_type = 'Lock'",
                    (name,),
                )
                if await cursor.fetchone():
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the transport never waited for the install lock")
        transport = await opening
    async with transport:
        assert (await transport.stats()).messages == 0
