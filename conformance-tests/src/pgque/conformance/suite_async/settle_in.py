"""Settling a lease in a transaction (``settle_in``; docs/transactions.md).

Gated on ``Capabilities.settle_in``: a transport without it raises Unsupported. With it, the
transport's own connection is used (``connection`` None), so the suite needs no driver: the
block's clean exit acks the lease, its ``nack`` / ``dead_letter`` / ``release`` settle it
otherwise, an exception leaves the lease unsettled, and a lease no longer live is refused.
"""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import _claim, _ev, _info
from pgque.core import AsyncSupportsSettleIn, AsyncTransport, InvalidInput, LeaseLost, Unsupported


async def test_a_transport_without_settle_in_raises_unsupported(harness: AsyncHarness) -> None:
    t = await harness.open()
    if harness.capabilities.settle_in:
        pytest.skip("the transport declares settle_in: the refusal is for those that do not")
    await t.publish("g", _ev(1))
    lease = await _claim(t)
    with pytest.raises(Unsupported, match="settle_in"):
        t.settle_in(lease)  # type: ignore[attr-defined]
    assert await t.ack(lease)


async def _settling(harness: AsyncHarness) -> tuple[AsyncTransport, AsyncSupportsSettleIn]:
    t = await harness.open()
    harness.require("settle_in")
    assert isinstance(t, AsyncSupportsSettleIn)
    return t, t


async def test_a_clean_block_acks_the_lease(harness: AsyncHarness) -> None:
    at, t = await _settling(harness)
    await at.publish("g", _ev(1))
    await at.publish("g", _ev(2))
    lease = await _claim(at)
    async with t.settle_in(lease) as tx:
        assert tx.connection is not None
    assert (await at.stats()).messages == 1
    # The worker's own ack afterwards is answered True: the message was settled once.
    assert await at.ack(lease)
    nxt = await _claim(at)
    assert nxt.event.data == {"n": 2}


async def test_an_exception_rolls_the_settlement_back(harness: AsyncHarness) -> None:
    at, t = await _settling(harness)
    await at.publish("g", _ev(1))
    lease = await _claim(at)
    with pytest.raises(RuntimeError, match="handler failed"):
        async with t.settle_in(lease):
            raise RuntimeError("handler failed")
    assert (await _info(at, "g")).state == "leased"
    assert await at.ack(lease)  # still the live lease
    assert (await at.stats()).messages == 0


async def test_nack_dead_letter_and_release_settle_in_the_block(harness: AsyncHarness) -> None:
    at, t = await _settling(harness)
    for group in ("n", "d", "r"):
        await at.publish(group, _ev(group))
    leases = {lease.group_id: lease for lease in await at.claim_many(3)}
    async with t.settle_in(leases["n"]) as tx:
        await tx.nack(delay=3600, error="not yet")
    info = await _info(at, "n")
    assert info.state == "parked"
    assert info.last_error is not None
    assert info.last_error.message == "not yet"
    async with t.settle_in(leases["d"]) as tx:
        await tx.dead_letter("bad input")
    [letter] = await at.dead_letters()
    assert letter.reason == "bad input"
    async with t.settle_in(leases["r"]) as tx:
        await tx.release()
    again = await _claim(at)
    assert (again.group_id, again.attempt) == ("r", 1)  # a release does not count


async def test_a_lost_lease_is_refused_on_entry(harness: AsyncHarness) -> None:
    at, t = await _settling(harness)
    await at.publish("g", _ev(1))
    lease = await _claim(at)
    assert await at.ack(lease)  # settled elsewhere: no longer the group's lease
    with pytest.raises(LeaseLost):
        async with t.settle_in(lease):
            pytest.fail("the block must not run")  # pragma: no cover


async def test_a_lease_is_settled_once_per_block(harness: AsyncHarness) -> None:
    at, t = await _settling(harness)
    await at.publish("g", _ev(1))
    lease = await _claim(at)
    async with t.settle_in(lease) as tx:
        await tx.release()
        with pytest.raises(InvalidInput, match="settled once"):
            await tx.nack()
    assert (await _claim(at)).attempt == 1  # the release stood


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
