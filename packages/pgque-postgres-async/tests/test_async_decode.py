"""One undecodable row must not fail a whole claim batch (asyncio transport)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import psycopg
import pytest

from pgque.core import Event
from pgque.postgres_async import AsyncPostgresTransport

AMake = Callable[..., Awaitable[AsyncPostgresTransport]]


@pytest.mark.asyncio
async def test_async_claim_many_dead_letters_the_undecodable_row_and_returns_the_rest(
    async_transport_factory: AMake, postgres_url: str
) -> None:
    transport = await async_transport_factory()
    await transport.publish("a", Event(kind="good-a"))
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as raw:
        await raw.execute(
            "INSERT INTO pgque_fifo.groups (queue, group_id, priority) VALUES (%s, 'b', 0)",
            (transport.queue,),
        )
        await raw.execute(
            "INSERT INTO pgque_fifo.messages (queue, group_id, event, enqueued_at) "
            "VALUES (%s, 'b', '[1, 2]', 0)",
            (transport.queue,),
        )
    leases = await transport.claim_many(10)
    assert [lease.event.kind for lease in leases] == ["good-a"]
    dead = await transport.dead_letters()
    assert [d.group_id for d in dead] == ["b"]
    assert "undecodable" in dead[0].reason
    assert (await transport.stats()).groups == 1
