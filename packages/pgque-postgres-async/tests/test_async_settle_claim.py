"""settle_and_claim on the asyncio PostgreSQL transport (pgque_settle_claim_v1)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import psycopg
import pytest

from pgque.core import Event, InvalidInput, Settlement
from pgque.postgres_async import AsyncPostgresTransport

AMake = Callable[..., Awaitable[AsyncPostgresTransport]]


@pytest.mark.asyncio
async def test_async_fused_call_settles_in_order_and_claims_distinct_groups(
    async_transport_factory: AMake,
) -> None:
    transport = await async_transport_factory()
    for group in ("a", "b", "c"):
        await transport.publish(group, Event(kind=group + "1"))
        await transport.publish(group, Event(kind=group + "2"))
    first = await transport.settle_and_claim([], 2)
    assert first.settled == []
    a, b = first.leases
    result = await transport.settle_and_claim(
        [Settlement.ack(a), Settlement.release(b), Settlement.ack(a)], 3
    )
    assert result.settled == [True, True, False]
    assert [(x.group_id, x.event.kind, x.attempt) for x in result.leases] == [
        ("c", "c1", 1),
        ("a", "a2", 1),
        ("b", "b1", 1),  # released: the attempt did not count
    ]


@pytest.mark.asyncio
async def test_async_fused_call_fences_a_stale_lease_and_records_errors(
    async_transport_factory: AMake,
) -> None:
    transport = await async_transport_factory()
    await transport.publish("a", Event(kind="a"))
    await transport.publish("b", Event(kind="b"))
    a, b = await transport.claim_many(2)
    stale = a.model_copy(update={"token": "f" * 32})
    result = await transport.settle_and_claim(
        [
            Settlement.ack(stale),
            Settlement.dead_letter(b, "bad", error=ValueError("boom")),
        ],
        0,
    )
    assert result.settled == [False, True]
    (dead,) = await transport.dead_letters()
    assert dead.error is not None
    assert (dead.error.type, dead.error.message) == (
        "ValueError",
        "boom",
    )
    assert await transport.ack(a)
    with pytest.raises(InvalidInput):
        await transport.settle_and_claim([Settlement.ack(a)], 10_001)


@pytest.mark.asyncio
async def test_async_fused_call_dead_letters_an_undecodable_head(
    async_transport_factory: AMake, postgres_url: str
) -> None:
    transport = await async_transport_factory()
    bad_id = await transport.publish("a", Event(kind="a"))
    await transport.publish("b", Event(kind="b"))
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as raw:
        await raw.execute("UPDATE pgque_fifo.messages SET event = '[1]' WHERE id = %s", [bad_id])
    result = await transport.settle_and_claim([], 5)
    assert [x.group_id for x in result.leases] == ["b"]
    (dead,) = await transport.dead_letters()
    assert dead.message_id == bad_id
    assert dead.reason.startswith("undecodable event")
