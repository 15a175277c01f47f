"""The protocols are runtime-checkable and the in-memory transports satisfy them."""

from __future__ import annotations

import pytest

from pgque.core import (
    AsyncInMemoryTransport,
    AsyncTransport,
    Capabilities,
    Event,
    InMemoryTransport,
    MemoryStore,
    Transport,
    TransportClosed,
)

METHODS = [
    "publish",
    "publish_many",
    "cancel",
    "scheduled",
    "publish_tick",
    "last_tick",
    "claim",
    "claim_many",
    "ack",
    "ack_many",
    "nack",
    "release",
    "settle_and_claim",
    "extend",
    "dead_letter",
    "dead_letters",
    "delete_dead_letters",
    "redrive",
    "unblock",
    "retry_now",
    "group",
    "groups",
    "oldest_groups",
    "pause",
    "resume",
    "bulk_pause",
    "bulk_resume",
    "bulk_retry_now",
    "bulk_redrive",
    "bulk_delete_dead_letters",
    "stats",
    "close",
]
PROPERTIES = ["capabilities", "queue", "max_attempts", "on_exhausted"]


def _matches(obj: object, protocol: type) -> bool:
    return isinstance(obj, protocol)


def test_sync_transport_matches_only_the_sync_protocol() -> None:
    transport = InMemoryTransport()
    assert _matches(transport, Transport)
    assert not _matches(transport, AsyncTransport)


def test_async_transport_matches_only_the_async_protocol() -> None:
    transport = AsyncInMemoryTransport()
    assert _matches(transport, AsyncTransport)
    assert not _matches(transport, Transport)


def test_other_objects_do_not_match() -> None:
    assert not isinstance(object(), Transport)
    assert not isinstance("memory://", AsyncTransport)


def _public(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def test_protocols_name_the_same_members() -> None:
    """Both protocols have exactly the members listed here: a new one is added to the list
    (and to docs/reference.md, which the docs-run session checks against the protocol)."""
    assert _public(Transport) == set(METHODS) | set(PROPERTIES)
    assert _public(AsyncTransport) == set(METHODS) | set(PROPERTIES)


def test_memory_transports_have_every_member() -> None:
    for name in METHODS + PROPERTIES:
        assert hasattr(InMemoryTransport, name), name
        assert hasattr(AsyncInMemoryTransport, name), name


def test_memory_capabilities_and_repr() -> None:
    transport = InMemoryTransport(queue="orders")
    assert transport.capabilities == Capabilities(
        injected_clock=True,
        priorities=True,
        dead_letters=True,
        purge=True,
        queues=True,
        fairness=True,
        scheduling=True,
        history=True,
        browse=True,
        workers=True,
    )
    assert repr(transport) == "InMemoryTransport(queue='orders')"
    assert repr(AsyncInMemoryTransport()) == "AsyncInMemoryTransport(queue='default')"


def test_leases_carry_queue_and_store_origin() -> None:
    store = MemoryStore()
    transport = InMemoryTransport(queue="orders", store=store)
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert (lease.queue, lease.origin) == ("orders", store.origin)
    assert store.origin != MemoryStore().origin


def test_closed_transport_refuses_work() -> None:
    transport = InMemoryTransport()
    with transport as same:
        assert same is transport
    with pytest.raises(TransportClosed):
        transport.stats()
    transport.close()


@pytest.mark.asyncio
async def test_closed_async_transport_refuses_work() -> None:
    transport = AsyncInMemoryTransport()
    async with transport as same:
        assert same is transport
    with pytest.raises(TransportClosed):
        await transport.claim()
