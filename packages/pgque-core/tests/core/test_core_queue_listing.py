"""``queues()`` of the in-memory transports: the store's queues holding messages or dead letters."""

from __future__ import annotations

import asyncio

import pytest

from pgque.core import AsyncInMemoryTransport, Event, InMemoryTransport, TransportClosed
from pgque.core.memory import MemoryStore


def test_queues_lists_what_holds_messages_or_dead_letters_in_byte_order() -> None:
    store = MemoryStore()
    names = ["orders-v2", "Billing.EU", "billing.eu", "a"]
    transports = {name: InMemoryTransport(store=store, queue=name) for name in names}
    assert transports["a"].queues() == []
    for transport in transports.values():
        transport.publish("g", Event(kind="k"))
    assert transports["a"].queues() == ["Billing.EU", "a", "billing.eu", "orders-v2"]
    lease = transports["a"].claim()
    assert lease is not None
    assert transports["a"].ack(lease)
    lease = transports["orders-v2"].claim()
    assert lease is not None
    assert transports["orders-v2"].dead_letter(lease, "bad")
    assert transports["a"].queues() == ["Billing.EU", "billing.eu", "orders-v2"]
    InMemoryTransport(store=MemoryStore()).publish("g", Event(kind="k"))  # another store
    assert transports["a"].queues() == ["Billing.EU", "billing.eu", "orders-v2"]
    transports["a"].close()
    with pytest.raises(TransportClosed):
        transports["a"].queues()


def test_async_queues() -> None:
    async def scenario() -> list[str]:
        store = MemoryStore()
        async with AsyncInMemoryTransport(store=store, queue="Billing.EU") as transport:
            await transport.publish("g", Event(kind="k"))
            return await transport.queues()

    assert asyncio.run(scenario()) == ["Billing.EU"]


def test_purge_empties_the_queue_and_ids_keep_growing() -> None:
    store = MemoryStore()
    queue = InMemoryTransport(store=store, queue="orders-v2")
    other = InMemoryTransport(store=store, queue="other")
    first = queue.publish("g", Event(kind="k"))
    other.publish("g", Event(kind="k"))
    lease = queue.claim()
    assert lease is not None
    assert queue.dead_letter(lease, "bad")
    queue.publish("g", Event(kind="k"))
    queue.purge()
    stats = queue.stats()
    assert (stats.groups, stats.messages, stats.dead_letters) == (0, 0, 0)
    assert queue.queues() == ["other"]
    assert queue.publish("g", Event(kind="k")) > first + 1


def test_the_abilities_are_declared_and_match_the_protocols() -> None:
    from pgque.core import AsyncSupportsQueues, SupportsPurge, SupportsQueues

    transport = InMemoryTransport()
    assert transport.capabilities.queues
    assert isinstance(transport, SupportsQueues)
    assert transport.capabilities.purge
    assert isinstance(transport, SupportsPurge)
    assert isinstance(AsyncInMemoryTransport(), AsyncSupportsQueues)
