"""Deadlocks and serialization failures surface as RetryableConflict (asyncio transport)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import psycopg
import pytest

from pgque.core import Event, PgqueError, RetryableConflict
from pgque.postgres_async import AsyncPostgresTransport
from pgque.postgres_async._errors import wrap_errors

AMake = Callable[..., Awaitable[AsyncPostgresTransport]]


@pytest.mark.parametrize(
    "error", [psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure]
)
def test_the_wrapper_maps_conflicts_to_retryable_conflict(error: type[psycopg.Error]) -> None:
    with pytest.raises(RetryableConflict) as caught, wrap_errors("pgque publish failed"):
        raise error("boom")
    assert isinstance(caught.value, PgqueError)
    assert isinstance(caught.value.__cause__, error)


@pytest.mark.asyncio
async def test_async_opposite_order_outbox_publishes_lose_with_retryable_conflict(
    async_transport_factory: AMake, postgres_url: str
) -> None:
    transport = await async_transport_factory()
    first = await psycopg.AsyncConnection.connect(postgres_url)
    second = await psycopg.AsyncConnection.connect(postgres_url)
    try:
        await transport.publish("a", Event(kind="1a"), connection=first)
        await transport.publish("b", Event(kind="2b"), connection=second)
        # Each now waits for the group the other holds: one cycle, one loser.
        results = await asyncio.gather(
            transport.publish("b", Event(kind="1b"), connection=first),
            transport.publish("a", Event(kind="2a"), connection=second),
            return_exceptions=True,
        )
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(lost) == 1
        assert isinstance(lost[0], RetryableConflict)
    finally:
        await first.close()
        await second.close()
