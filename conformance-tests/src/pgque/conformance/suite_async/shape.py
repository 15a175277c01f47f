"""The transport's shape: the protocol, an empty new queue, close and context-manager use."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _empty_stats_ok,
    _ev,
    _n,
)
from pgque.core import (
    AsyncSupportsBrowse,
    AsyncSupportsHistory,
    AsyncSupportsPurge,
    AsyncSupportsWakeups,
    AsyncSupportsWorkers,
    AsyncTransport,
    Capabilities,
    PgqueError,
)

# -- shape ---------------------------------------------------------------------------------


async def test_satisfies_protocol(atransport: AsyncTransport) -> None:
    assert isinstance(atransport, AsyncTransport)
    assert isinstance(atransport.capabilities, Capabilities)
    assert isinstance(atransport.queue, str)
    assert atransport.queue


async def test_optional_abilities_match_their_flags(atransport: AsyncTransport) -> None:
    """A transport declares an ability beyond the contract exactly when it has its method."""
    capabilities = atransport.capabilities
    assert capabilities.wakeups == isinstance(atransport, AsyncSupportsWakeups)
    assert capabilities.purge == isinstance(atransport, AsyncSupportsPurge)
    assert capabilities.history == isinstance(atransport, AsyncSupportsHistory)
    assert capabilities.browse == isinstance(atransport, AsyncSupportsBrowse)
    assert capabilities.workers == isinstance(atransport, AsyncSupportsWorkers)


async def test_purge_empties_the_queue_and_only_it(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("purge")
    assert isinstance(atransport, AsyncSupportsPurge)
    other = await harness.make()
    await atransport.publish("a", _ev(1))
    await atransport.publish("b", _ev(2))
    held = await _claim(atransport)
    await other.publish("a", _ev(3))
    await atransport.purge()
    await _empty_stats_ok(atransport)
    assert await atransport.claim() is None
    assert not await atransport.ack(held)
    assert [_n(await _claim(other))] == [3]


async def test_new_queue_is_empty(atransport: AsyncTransport) -> None:
    assert await atransport.claim() is None
    assert await atransport.claim_many(5) == []
    await _empty_stats_ok(atransport)
    assert (await atransport.stats()).dead_letters == 0


async def test_close_is_idempotent_and_refuses_further_use(harness: AsyncHarness) -> None:
    await harness.open()
    other = await harness.make()
    await other.close()
    await other.close()
    with pytest.raises(PgqueError):
        await other.publish("g", _ev())


async def test_context_manager_returns_usable_transport(harness: AsyncHarness) -> None:
    first = await harness.open()
    async with await harness.make(queue=first.queue) as second:
        assert await second.publish("g", _ev(1)) > 0
    assert _n(await _claim(first)) == 1


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
