"""Queue names users pick (``orders-v2``, ``Billing.EU``) work end to end on PostgreSQL.

Names reach SQL only as bound parameters and the LISTEN channel is a digest of the name, so a
dot, a dash or an upper-case letter needs no quoting anywhere. ``queues()`` lists them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from pgque.core import Event, InvalidInput
from pgque.postgres import PostgresTransport
from pgque.postgres_async import AsyncPostgresTransport

NAMES = ["orders-v2", "Billing.EU", "billing.eu"]


def _purge(url: str) -> None:
    for name in NAMES:
        with PostgresTransport.from_dsn(url, queue=name, min_size=1, max_size=1) as transport:
            transport.purge()


@pytest.fixture
def clean(postgres_url: str) -> Iterator[None]:
    _purge(postgres_url)
    yield None
    _purge(postgres_url)


def test_user_queue_names_publish_claim_ack_and_list(postgres_url: str, clean: None) -> None:
    opened = [PostgresTransport.from_dsn(postgres_url, queue=n, max_size=2) for n in NAMES]
    try:
        for transport in opened:
            transport.publish("g", Event(kind=f"k.{transport.queue}"))
        listed = opened[0].queues()
        assert set(NAMES) <= set(listed)
        assert listed == sorted(listed, key=lambda n: n.encode())
        # Case matters: Billing.EU and billing.eu are two queues.
        for transport in opened:
            lease = transport.claim(30.0)
            assert lease is not None
            assert lease.event.kind == f"k.{transport.queue}"
            assert transport.claim(30.0) is None
            assert transport.wait_for_messages(0.01) is True  # LISTEN on the name's channel
            assert transport.ack(lease) is True
        assert not set(NAMES) & set(opened[0].queues())
    finally:
        for transport in opened:
            transport.close()


def test_a_dead_letter_keeps_its_queue_listed(postgres_url: str, clean: None) -> None:
    with PostgresTransport.from_dsn(postgres_url, queue="orders-v2", max_size=1) as transport:
        transport.publish("g", Event(kind="k"))
        lease = transport.claim(30.0)
        assert lease is not None
        assert transport.dead_letter(lease, "bad")
        assert transport.stats().messages == 0
        assert "orders-v2" in transport.queues()


def test_async_user_queue_names(postgres_url: str, clean: None) -> None:
    async def scenario() -> None:
        transport = await AsyncPostgresTransport.from_dsn(postgres_url, queue="Billing.EU")
        async with transport:
            await transport.publish("g", Event(kind="k"))
            assert "Billing.EU" in await transport.queues()
            lease = await transport.claim(30.0)
            assert lease is not None
            assert await transport.ack(lease)
            assert "Billing.EU" not in await transport.queues()

    asyncio.run(scenario())


@pytest.mark.parametrize("name", ["-v2", "orders v2", "orders:v2", "o" * 65, "Bill{ing}"])
def test_names_outside_the_grammar_are_refused(postgres_url: str, name: str) -> None:
    with pytest.raises(InvalidInput, match="queue name"):
        PostgresTransport(postgres_url, queue=name)
    with pytest.raises(InvalidInput, match="queue name"):
        AsyncPostgresTransport(postgres_url, queue=name)
