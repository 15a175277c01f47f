"""The asyncio transport's issue-14 calls on PostgreSQL: what the conformance suite cannot see
(the server's clock stamping an error, the row of a paused group, the default max_attempts)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import psycopg
import pytest

from pgque.core import Event, InvalidInput
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS
from pgque.postgres_async import AsyncPostgresTransport

pytestmark = pytest.mark.asyncio

AMake = Callable[..., Awaitable[AsyncPostgresTransport]]


async def test_defaults_and_a_server_stamped_error(
    async_transport_factory: AMake, postgres_url: str
) -> None:
    transport = await async_transport_factory()
    assert transport.max_attempts == DEFAULT_MAX_ATTEMPTS
    assert transport.on_exhausted == "dead_letter"
    await transport.publish("g", Event(kind="k"))
    lease = await transport.claim(holder="box:1:0")
    assert lease is not None
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
        row = await cursor.fetchone()
    assert row is not None
    before = float(row[0])
    assert await transport.nack(lease, error=RuntimeError("down"))
    info = await transport.group("g")
    assert info is not None
    assert info.last_error is not None
    assert (info.last_error.type, info.last_error.message) == ("RuntimeError", "down")
    assert before <= info.last_error.at <= before + 60
    with pytest.raises(InvalidInput):
        await transport.release(lease.model_copy(update={"queue": "elsewhere"}))


async def test_pause_release_redrive_and_pages(async_transport_factory: AMake) -> None:
    transport = await async_transport_factory()
    first = await transport.publish("b", Event(kind="one"))
    await transport.publish("b", Event(kind="two"))
    assert await transport.pause("a")
    lease = await transport.claim()
    assert lease is not None
    assert lease.message_id == first
    assert await transport.release(lease)
    lease = await transport.claim()
    assert lease is not None
    assert lease.attempt == 1
    assert await transport.dead_letter(lease, "bad", error="why")
    (dead,) = await transport.dead_letters(after=0)
    assert dead.error is not None
    assert dead.error.message == "why"
    assert await transport.redrive() == 1
    assert [(i.group_id, i.state, i.depth) for i in await transport.groups()] == [
        ("a", "paused", 0),
        ("b", "ready", 2),
    ]
    info = await transport.group("b")
    assert info is not None
    assert info.head_message_id == first
    stats = await transport.stats()
    assert (stats.groups, stats.paused, stats.messages) == (2, 1, 2)
    assert await transport.resume("a")
    assert await transport.group("a") is None
    assert await transport.delete_dead_letters([dead.id]) == 0
