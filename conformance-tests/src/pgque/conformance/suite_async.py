"""The asyncio conformance suite: every behaviour of the contract, as pytest tests.

Enable it in a backend's test module with ``from pgque.conformance.suite_async import *`` and an
``async_transport_factory`` fixture in its ``conftest.py`` (see the package README). Tests are
gated on the transport's declared :class:`~pgque.core.Capabilities`, never on backend names.
"""

# The source of its blocking twin, suite_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import math
import os
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import pytest_asyncio  # async-only
from hypothesis import HealthCheck, given, settings

from pgque.conformance._concurrency_async import test_concurrent_drain_tasks
from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance._program import (
    GROUPS,
    Op,
    Policy,
    dead_view,
    event_for,
    lease_view,
    policies,
    programs,
    stats_view,
)
from pgque.conformance._types import AsyncTransportFactory
from pgque.conformance.clock import FakeClock
from pgque.core import (
    AsyncTransport,
    Capabilities,
    DeadLetter,
    Event,
    InvalidInput,
    Lease,
    PgqueError,
    QueueModel,
    QueueStats,
)

EXHAUSTED_REASON = "max_attempts exhausted"
UNBLOCK_DROP_REASON = "dropped by operator (unblock)"

#: Examples of the model-agreement property test (raise it for a soak run).
EXAMPLES_ENV = "PGQUE_CONFORMANCE_EXAMPLES"


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def harness(async_transport_factory: AsyncTransportFactory) -> AsyncHarness:
    """Return the test's harness: its transports share one clock."""
    return AsyncHarness(async_transport_factory)


@pytest_asyncio.fixture
async def atransport(harness: AsyncHarness) -> AsyncTransport:
    """Return the test's transport on a fresh, empty queue."""
    return await harness.open()


@pytest.fixture(autouse=True)
def pgque_conformance_known_gaps(request: pytest.FixtureRequest) -> None:
    """Turn a backend's declared known gaps into strict xfails.

    A backend may define a fixture ``conformance_known_gaps`` returning ``{test name: reason}``;
    those tests are expected to fail, and fail the run once they pass.
    """
    try:
        gaps: dict[str, str] = request.getfixturevalue("conformance_known_gaps")
    except pytest.FixtureLookupError:
        return
    node = request.node
    for name in (node.name, getattr(node, "originalname", node.name)):
        if name in gaps:
            request.applymarker(pytest.mark.xfail(reason=gaps[name], strict=True))
            return


# -- helpers -------------------------------------------------------------------------------


def _ev(n: Any = 0, kind: str = "test") -> Event:
    return Event(kind=kind, data={"n": n})


def _n(lease: Lease | None) -> Any:
    assert lease is not None
    assert isinstance(lease.event.data, dict)
    return lease.event.data["n"]


async def _claim(transport: AsyncTransport, visibility: float = 60.0, **kw: Any) -> Lease:
    lease = await transport.claim(visibility, **kw)
    assert lease is not None, "expected a deliverable message"
    return lease


async def _drain(transport: AsyncTransport) -> list[tuple[str, Any]]:
    """Claim and ack until nothing is deliverable; return (group, n) in delivery order."""
    out: list[tuple[str, Any]] = []
    for _ in range(100_000):
        lease = await transport.claim(60.0)
        if lease is None:
            return out
        assert await transport.ack(lease)
        out.append((lease.group_id, _n(lease)))
    raise AssertionError("the queue never drained")


def _comparable(stats: QueueStats) -> QueueStats:
    # The age moves with a real clock; everything else must not change on refused input.
    return stats.model_copy(update={"oldest_age_s": None})


async def _snapshot(transport: AsyncTransport) -> tuple[QueueStats, list[DeadLetter]]:
    return _comparable(await transport.stats()), await transport.dead_letters(1000)


async def _empty_stats_ok(transport: AsyncTransport) -> None:
    stats = await transport.stats()
    assert (stats.groups, stats.messages, stats.in_flight, stats.parked, stats.blocked) == (
        0,
        0,
        0,
        0,
        0,
    )
    assert stats.oldest_age_s is None
    assert stats.next_resume_at is None


# -- shape ---------------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_satisfies_protocol(atransport: AsyncTransport) -> None:
    assert isinstance(atransport, AsyncTransport)
    assert isinstance(atransport.capabilities, Capabilities)
    assert isinstance(atransport.queue, str)
    assert atransport.queue


@pytest.mark.asyncio  # async-only
async def test_new_queue_is_empty(atransport: AsyncTransport) -> None:
    assert await atransport.claim() is None
    assert await atransport.claim_many(5) == []
    await _empty_stats_ok(atransport)
    assert (await atransport.stats()).dead_letters == 0


@pytest.mark.asyncio  # async-only
async def test_close_is_idempotent_and_refuses_further_use(harness: AsyncHarness) -> None:
    await harness.open()
    other = await harness.make()
    await other.close()
    await other.close()
    with pytest.raises(PgqueError):
        await other.publish("g", _ev())


@pytest.mark.asyncio  # async-only
async def test_context_manager_returns_usable_transport(harness: AsyncHarness) -> None:
    first = await harness.open()
    async with await harness.make(queue=first.queue) as second:
        assert await second.publish("g", _ev(1)) > 0
    assert _n(await _claim(first)) == 1


# -- FIFO ----------------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_publish_returns_increasing_ids(atransport: AsyncTransport) -> None:
    ids = [await atransport.publish(f"g{i % 3}", _ev(i)) for i in range(10)]
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


@pytest.mark.asyncio  # async-only
async def test_fifo_within_group_many_messages(atransport: AsyncTransport) -> None:
    ids = [await atransport.publish("g", _ev(i)) for i in range(60)]
    seen: list[int] = []
    for i in range(60):
        lease = await _claim(atransport)
        assert lease.message_id == ids[i]
        seen.append(_n(lease))
        assert await atransport.ack(lease)
    assert seen == list(range(60))
    assert await atransport.claim() is None


@pytest.mark.asyncio  # async-only
async def test_fifo_after_nack(atransport: AsyncTransport) -> None:
    for i in range(5):
        await atransport.publish("g", _ev(i))
    order: list[int] = []
    for i in range(5):
        first = await _claim(atransport)
        assert await atransport.nack(first)
        again = await _claim(atransport)
        assert again.message_id == first.message_id
        assert _n(again) == i
        assert await atransport.ack(again)
        order.append(_n(again))
    assert order == list(range(5))


@pytest.mark.asyncio  # async-only
async def test_publish_many_keeps_order_per_group(atransport: AsyncTransport) -> None:
    items = [(f"g{i % 4}", _ev(i)) for i in range(40)]
    ids = await atransport.publish_many(items)
    assert len(ids) == 40
    assert ids == sorted(ids)
    assert len(set(ids)) == 40
    per_group: dict[str, list[int]] = {}
    for group, n in await _drain(atransport):
        per_group.setdefault(group, []).append(n)
    assert per_group == {f"g{k}": list(range(k, 40, 4)) for k in range(4)}


@pytest.mark.asyncio  # async-only
async def test_publish_many_of_nothing(atransport: AsyncTransport) -> None:
    assert await atransport.publish_many([]) == []
    await _empty_stats_ok(atransport)


# -- one lease per group -------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_one_lease_per_group(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert _n(lease) == 1
    assert await atransport.claim() is None
    assert await atransport.claim_many(3) == []


@pytest.mark.asyncio  # async-only
async def test_other_groups_stay_claimable(atransport: AsyncTransport) -> None:
    await atransport.publish("a", _ev("a1"))
    await atransport.publish("a", _ev("a2"))
    await atransport.publish("b", _ev("b1"))
    first = await _claim(atransport)
    second = await _claim(atransport)
    assert {first.group_id, second.group_id} == {"a", "b"}
    assert await atransport.claim() is None


@pytest.mark.asyncio  # async-only
async def test_none_when_all_groups_in_flight(atransport: AsyncTransport) -> None:
    for g in range(5):
        for i in range(3):
            await atransport.publish(f"g{g}", _ev(i))
    leases = [await _claim(atransport) for _ in range(5)]
    assert sorted(lease.group_id for lease in leases) == [f"g{g}" for g in range(5)]
    assert await atransport.claim() is None
    assert (await atransport.stats()).in_flight == 5


@pytest.mark.asyncio  # async-only
async def test_ack_frees_the_group(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.claim() is None
    assert await atransport.ack(lease)
    assert _n(await _claim(atransport)) == 2


@pytest.mark.asyncio  # async-only
async def test_queue_ends_empty(atransport: AsyncTransport) -> None:
    await atransport.publish_many([(f"g{i % 7}", _ev(i)) for i in range(50)])
    assert len(await _drain(atransport)) == 50
    assert await atransport.claim() is None
    await _empty_stats_ok(atransport)


@pytest.mark.asyncio  # async-only
async def test_lease_fields(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    event = Event(kind="created", data={"x": [1, 2]}, headers={"h": "v"})
    message_id = await atransport.publish("order-1", event, priority=2)
    before = harness.now()
    lease = await _claim(atransport, 30.0)
    assert lease.group_id == "order-1"
    assert lease.message_id == message_id
    assert lease.event == event
    assert lease.priority == 2
    assert lease.attempt == 1
    assert lease.token
    assert lease.queue == atransport.queue
    if harness.fake_time:
        assert lease.expires_at == pytest.approx(before + 30.0, abs=1e-3)
    else:
        assert lease.expires_at > before


@pytest.mark.asyncio  # async-only
async def test_tokens_are_unique_per_claim(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev())
    tokens = set()
    for _ in range(5):
        lease = await _claim(atransport)
        tokens.add(lease.token)
        assert await atransport.nack(lease)
    assert len(tokens) == 5


# -- nack ----------------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_nack_zero_redelivers_at_once(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    first = await _claim(atransport)
    assert await atransport.nack(first, delay=0)
    again = await _claim(atransport)
    assert again.message_id == first.message_id
    assert again.token != first.token
    assert again.attempt == first.attempt + 1
    stats = await atransport.stats()
    assert (stats.messages, stats.parked) == (2, 0)
    assert await atransport.ack(again)
    assert [n for _g, n in await _drain(atransport)] == [2]


@pytest.mark.asyncio  # async-only
async def test_nack_delay_parks_the_whole_group(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish("parked", _ev(1))
    await atransport.publish("parked", _ev(2))
    await atransport.publish("other", _ev(3))
    got = {lease.group_id: lease for lease in await atransport.claim_many(5)}
    assert set(got) == {"parked", "other"}
    lease = got["parked"]
    assert await atransport.nack(lease, delay=2 * u)
    assert await atransport.ack(got["other"])
    await atransport.publish("other", _ev(4))
    assert _n(await _claim(atransport)) == 4  # other groups go on while one is parked
    assert await atransport.claim() is None
    await harness.advance(u)
    assert await atransport.claim() is None
    await harness.advance(1.5 * u)
    back = await _claim(atransport)
    assert back.message_id == lease.message_id
    assert back.attempt == 2
    assert _n(back) == 1


@pytest.mark.asyncio  # async-only
async def test_nack_delay_shows_in_stats(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    await atransport.publish("g", _ev())
    lease = await _claim(atransport)
    before = harness.now()
    assert await atransport.nack(lease, delay=5 * harness.unit)
    stats = await atransport.stats()
    assert (stats.groups, stats.in_flight, stats.parked, stats.blocked) == (1, 0, 1, 0)
    assert stats.next_resume_at is not None
    if harness.fake_time:
        assert stats.next_resume_at == pytest.approx(before + 5 * harness.unit, abs=1e-3)
    else:
        assert stats.next_resume_at > before


# -- expiry --------------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_expired_lease_is_reclaimed_with_new_token(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    worker2 = await harness.make(queue=atransport.queue)
    await atransport.publish("g", _ev(1))
    first = await _claim(atransport, u)
    assert await worker2.claim(u) is None
    await harness.advance(1.5 * u)
    second = await _claim(worker2, 10 * u)
    assert second.message_id == first.message_id
    assert second.token != first.token
    assert second.attempt == first.attempt + 1 == 2
    assert await worker2.ack(second)


@pytest.mark.asyncio  # async-only
async def test_late_ack_succeeds_until_someone_reclaims(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport, harness.unit)
    await harness.advance(1.5 * harness.unit)
    assert await atransport.ack(lease)
    assert await atransport.claim() is None


# -- fencing -------------------------------------------------------------------------------


async def _stolen(transport: AsyncTransport, harness: AsyncHarness) -> tuple[Lease, Lease]:
    """Publish two messages; return (stale lease, the live lease that replaced it)."""
    await transport.publish("g", _ev(1))
    await transport.publish("g", _ev(2))
    stale = await _claim(transport, harness.unit)
    await harness.advance(1.5 * harness.unit)
    worker2 = await harness.make(queue=transport.queue)
    live = await _claim(worker2, 10 * harness.unit)
    assert live.message_id == stale.message_id
    return stale, live


@pytest.mark.asyncio  # async-only
async def test_stale_ack_is_fenced(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    stale, live = await _stolen(atransport, harness)
    before = await _snapshot(atransport)
    assert await atransport.ack(stale) is False
    assert await _snapshot(atransport) == before
    assert await atransport.ack(live)
    assert [n for _g, n in await _drain(atransport)] == [2]


@pytest.mark.asyncio  # async-only
async def test_stale_nack_is_fenced(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    stale, live = await _stolen(atransport, harness)
    before = await _snapshot(atransport)
    assert await atransport.nack(stale) is False
    assert await atransport.nack(stale, delay=100.0) is False
    assert await _snapshot(atransport) == before
    assert await atransport.claim() is None
    assert await atransport.ack(live)


@pytest.mark.asyncio  # async-only
async def test_stale_extend_is_fenced(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    stale, live = await _stolen(atransport, harness)
    before = await _snapshot(atransport)
    assert await atransport.extend(stale, 100 * harness.unit) is None
    assert await _snapshot(atransport) == before
    assert await atransport.ack(live)


@pytest.mark.asyncio  # async-only
async def test_stale_dead_letter_is_fenced(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    stale, live = await _stolen(atransport, harness)
    before = await _snapshot(atransport)
    assert await atransport.dead_letter(stale, "stale") is False
    assert await _snapshot(atransport) == before
    assert await atransport.dead_letters() == []
    assert await atransport.ack(live)


@pytest.mark.asyncio  # async-only
async def test_double_ack_is_harmless(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.ack(lease)
    assert await atransport.ack(lease) is False
    assert await atransport.ack_many([lease]) == [False]
    assert [n for _g, n in await _drain(atransport)] == [2]


@pytest.mark.asyncio  # async-only
async def test_ack_after_nack_is_fenced(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport)
    assert await atransport.nack(lease)
    assert await atransport.ack(lease) is False
    assert await atransport.extend(lease, 60.0) is None
    again = await _claim(atransport)
    assert await atransport.ack(again)


@pytest.mark.asyncio  # async-only
async def test_stale_lease_of_next_message_is_fenced(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    first = await _claim(atransport)
    assert await atransport.ack(first)
    await atransport.publish("g", _ev(2))
    second = await _claim(atransport)
    assert await atransport.nack(first) is False
    assert await atransport.ack(second)


# -- publish into a busy group -------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_publish_into_in_flight_group_keeps_lease(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1), priority=3)
    lease = await _claim(atransport, 5 * harness.unit)
    await atransport.publish("g", _ev(2), priority=0)
    await atransport.publish_many([("g", _ev(3))], priority=1)
    assert await atransport.claim() is None
    stats = await atransport.stats()
    assert (stats.in_flight, stats.messages) == (1, 3)
    assert await atransport.ack(lease)
    nxt = await _claim(atransport, min_priority=3)
    assert (_n(nxt), nxt.priority) == (2, 3)


@pytest.mark.asyncio  # async-only
async def test_publish_into_parked_group_keeps_park(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish("g", _ev(1), priority=2)
    lease = await _claim(atransport)
    assert await atransport.nack(lease, delay=2 * u)
    await atransport.publish("g", _ev(2), priority=4)
    assert await atransport.claim() is None
    assert (await atransport.stats()).parked == 1
    await harness.advance(2.5 * u)
    back = await _claim(atransport, min_priority=2)
    assert (_n(back), back.priority, back.attempt) == (1, 2, 2)


@pytest.mark.asyncio  # async-only
async def test_priority_fixed_by_first_publish(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("priorities")
    await atransport.publish("g", _ev(1), priority=1)
    await atransport.publish("g", _ev(2), priority=4)
    assert await atransport.claim(min_priority=2) is None
    lease = await _claim(atransport, min_priority=1)
    assert lease.priority == 1
    assert await atransport.ack(lease)
    assert (await _claim(atransport)).priority == 1


@pytest.mark.asyncio  # async-only
async def test_priority_resets_after_drain(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("priorities")
    await atransport.publish("g", _ev(1), priority=4)
    assert await atransport.ack(await _claim(atransport, min_priority=4))
    await atransport.publish("g", _ev(2), priority=0)
    assert await atransport.claim(min_priority=1) is None
    assert (await _claim(atransport)).priority == 0


# -- round-robin ---------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_served_group_yields_to_never_served(atransport: AsyncTransport) -> None:
    await atransport.publish("a", _ev("a1"))
    await atransport.publish("a", _ev("a2"))
    first = await _claim(atransport)
    assert first.group_id == "a"
    assert await atransport.ack(first)
    await atransport.publish("b", _ev("b1"))
    assert (await _claim(atransport)).group_id == "b"


@pytest.mark.asyncio  # async-only
async def test_round_robin_cycles_through_groups(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    for i in range(3):
        for g in "abc":
            await atransport.publish(g, _ev(f"{g}{i}"))
    order: list[Any] = []
    while (lease := await atransport.claim(60.0)) is not None:
        order.append(_n(lease))
        assert await atransport.ack(lease)
        # Service times must differ: a group served at the same instant ties by group id.
        await harness.advance(0.001)
    assert order == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]


@pytest.mark.asyncio  # async-only
async def test_never_served_groups_go_by_group_id(atransport: AsyncTransport) -> None:
    for g in ["m", "b", "z", "a", "B", "é", "0"]:
        await atransport.publish(g, _ev(g))
    order = [g for g, _n in await _drain(atransport)]
    assert order == sorted(["m", "b", "z", "a", "B", "é", "0"])


@pytest.mark.asyncio  # async-only
async def test_hot_group_cannot_starve_cold_groups(atransport: AsyncTransport) -> None:
    await atransport.publish_many([("a-hot", _ev(i)) for i in range(1000)])
    cold = [f"z-cold-{i:02d}" for i in range(50)]
    first = await _claim(atransport)
    assert first.group_id == "a-hot"
    assert await atransport.ack(first)
    await atransport.publish_many([(g, _ev(g)) for g in cold])
    served: list[str] = [first.group_id]
    while len(served) < 51:
        lease = await _claim(atransport)
        served.append(lease.group_id)
        assert await atransport.ack(lease)
    assert set(cold) <= set(served)
    assert (await atransport.stats()).messages == 999


# -- priority ------------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_min_priority_filters(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    harness.require("priorities")
    for p in range(5):
        await atransport.publish(f"p{p}", _ev(p), priority=p)
    got = await atransport.claim_many(10, min_priority=3)
    assert sorted(lease.priority for lease in got) == [3, 4]
    lease = await _claim(atransport, min_priority=1)
    assert (lease.group_id, lease.priority) == ("p1", 1)
    assert (await _claim(atransport, min_priority=1)).group_id == "p2"
    assert await atransport.claim(min_priority=1) is None
    assert (await _claim(atransport)).group_id == "p0"


@pytest.mark.asyncio  # async-only
async def test_high_priority_found_behind_low_priority_backlog(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("priorities")
    await atransport.publish_many([(f"low-{i:03d}", _ev(i)) for i in range(500)], priority=0)
    await atransport.publish("zzz-urgent", _ev("urgent"), priority=4)
    lease = await _claim(atransport, min_priority=4)
    assert (lease.group_id, lease.priority) == ("zzz-urgent", 4)
    assert await atransport.ack(lease)
    assert await atransport.claim(min_priority=1) is None
    assert (await atransport.stats()).messages == 500


# -- claim_many ----------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_claim_many_returns_distinct_groups(atransport: AsyncTransport) -> None:
    await atransport.publish_many([("a", _ev(i)) for i in range(5)])
    await atransport.publish_many([("b", _ev(i)) for i in range(5)])
    await atransport.publish("c", _ev(0))
    leases = await atransport.claim_many(10)
    assert sorted(lease.group_id for lease in leases) == ["a", "b", "c"]
    assert all(_n(lease) == 0 for lease in leases)
    assert await atransport.claim_many(10) == []
    assert await atransport.ack_many(leases) == [True, True, True]
    again = await atransport.claim_many(10)
    assert sorted(lease.group_id for lease in again) == ["a", "b"]
    assert all(_n(lease) == 1 for lease in again)


@pytest.mark.asyncio  # async-only
async def test_claim_many_respects_n(atransport: AsyncTransport) -> None:
    await atransport.publish_many([(f"g{i}", _ev(i)) for i in range(6)])
    first = await atransport.claim_many(4)
    assert [lease.group_id for lease in first] == ["g0", "g1", "g2", "g3"]
    rest = await atransport.claim_many(4)
    assert [lease.group_id for lease in rest] == ["g4", "g5"]


async def _claim_many_scenario(transport: AsyncTransport, harness: AsyncHarness) -> None:
    for i in range(8):
        for k in range(i % 3 + 1):
            await transport.publish(f"g{i}", _ev(f"{i}.{k}"), priority=i % 2)
    # Serve some groups at distinct times so the round-robin keys differ.
    for group in ("g3", "g0", "g6"):
        while True:
            lease = await _claim(transport)
            if lease.group_id == group:
                assert await transport.ack(lease)
                break
            assert await transport.nack(lease)
        await harness.advance(0.01)


@pytest.mark.asyncio  # async-only
async def test_claim_many_matches_one_by_one(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("injected_clock")
    batch_q = atransport
    single_q = await harness.make()
    await _claim_many_scenario(batch_q, harness)
    await _claim_many_scenario(single_q, harness)

    def view(lease: Lease) -> tuple[str, Any, int, int]:
        return (lease.group_id, _n(lease), lease.attempt, lease.priority)

    for n in (3, 2, 10):
        batch = [view(lease) for lease in await batch_q.claim_many(n, 60.0)]
        single: list[tuple[str, Any, int, int]] = []
        for _ in range(n):
            lease = await single_q.claim(60.0)
            if lease is None:
                break
            single.append(view(lease))
        assert batch == single


@pytest.mark.asyncio  # async-only
async def test_ack_many_reports_each_lease(atransport: AsyncTransport) -> None:
    await atransport.publish_many([("a", _ev(1)), ("a", _ev(2)), ("b", _ev(3))])
    a1 = await _claim(atransport)
    b1 = await _claim(atransport)
    assert await atransport.ack(a1)
    assert await atransport.ack_many([a1, b1]) == [False, True]
    assert await atransport.ack_many([]) == []
    assert [n for _g, n in await _drain(atransport)] == [2]


# -- max_attempts --------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_max_attempts_dead_letters_and_continues(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=2, on_exhausted="dead_letter")
    await q.publish("g", _ev(1), priority=1)
    await q.publish("g", _ev(2))
    for attempt in (1, 2):
        lease = await _claim(q)
        assert (_n(lease), lease.attempt) == (1, attempt)
        assert await q.nack(lease)
    nxt = await _claim(q)
    assert (_n(nxt), nxt.attempt) == (2, 1)
    [dead] = await q.dead_letters()
    assert dead.group_id == "g"
    assert dead.reason == EXHAUSTED_REASON
    assert dead.attempts == 2
    assert dead.priority == 1
    assert isinstance(dead.event.data, dict)
    assert dead.event.data["n"] == 1
    assert (await q.stats()).dead_letters == 1


@pytest.mark.asyncio  # async-only
async def test_max_attempts_drops_an_emptied_group(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1)
    await q.publish("a", _ev("a"))
    await q.publish("b", _ev("b"))
    lease = await _claim(q)
    assert lease.group_id == "a"
    assert await q.nack(lease)
    nxt = await _claim(q)
    assert nxt.group_id == "b"
    assert await q.ack(nxt)
    assert await q.claim() is None
    stats = await q.stats()
    assert (stats.groups, stats.messages, stats.dead_letters) == (0, 0, 1)


@pytest.mark.asyncio  # async-only
async def test_max_attempts_counts_expired_leases(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    u = harness.unit
    q = await harness.make(max_attempts=2)
    await q.publish("g", _ev(1))
    await _claim(q, u)
    await harness.advance(1.5 * u)
    second = await _claim(q, u)
    assert second.attempt == 2
    await harness.advance(1.5 * u)
    assert await q.claim(u) is None
    assert [d.reason for d in await q.dead_letters()] == [EXHAUSTED_REASON]
    assert await q.ack(second) is False


@pytest.mark.asyncio  # async-only
async def test_max_attempts_block_policy(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    await q.publish("other", _ev(3))
    lease = await _claim(q)
    assert lease.group_id == "g"
    assert await q.nack(lease)
    nxt = await _claim(q)
    assert nxt.group_id == "other"
    assert await q.ack(nxt)
    assert await q.claim() is None
    stats = await q.stats()
    assert (stats.groups, stats.messages, stats.blocked, stats.dead_letters) == (1, 2, 1, 0)
    assert (stats.in_flight, stats.parked) == (0, 0)
    assert await q.dead_letters() == []
    assert await q.ack(lease) is False


@pytest.mark.asyncio  # async-only
async def test_unblock_retries_the_head(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    assert await q.nack(await _claim(q))
    assert await q.claim() is None
    assert await q.unblock("g") is True
    assert await q.unblock("g") is False
    again = await _claim(q)
    assert (_n(again), again.attempt) == (1, 1)
    assert await q.ack(again)
    assert [n for _g, n in await _drain(q)] == [2]
    assert (await q.stats()).blocked == 0


@pytest.mark.asyncio  # async-only
async def test_unblock_drop_head_dead_letters_it(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    assert await q.nack(await _claim(q))
    assert await q.claim() is None
    assert await q.unblock("g", drop_head=True) is True
    [dead] = await q.dead_letters()
    assert (dead.reason, dead.group_id, dead.attempts) == (UNBLOCK_DROP_REASON, "g", 1)
    assert [n for _g, n in await _drain(q)] == [2]


@pytest.mark.asyncio  # async-only
async def test_unblock_of_unblocked_group_is_false(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    assert await atransport.unblock("nobody") is False
    await atransport.publish("g", _ev())
    assert await atransport.unblock("g") is False
    lease = await _claim(atransport)
    assert await atransport.unblock("g") is False
    assert await atransport.ack(lease)


# -- dead letters --------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_dead_letter_moves_head_and_group_continues(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1), priority=2)
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.dead_letter(lease, "poison: bad schema")
    assert await atransport.ack(lease) is False
    [dead] = await atransport.dead_letters()
    assert dead.group_id == "g"
    assert dead.message_id == lease.message_id
    assert dead.event == lease.event
    assert (dead.reason, dead.priority, dead.attempts) == ("poison: bad schema", 2, 1)
    assert [n for _g, n in await _drain(atransport)] == [2]


@pytest.mark.asyncio  # async-only
async def test_dead_letters_listing_is_ordered_and_limited(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    for i in range(5):
        await atransport.publish(f"g{i}", _ev(i))
    for _ in range(5):
        lease = await _claim(atransport)
        assert await atransport.dead_letter(lease, f"r{_n(lease)}")
    listed = await atransport.dead_letters()
    assert [d.reason for d in listed] == [f"r{i}" for i in range(5)]
    assert [d.id for d in listed] == sorted(d.id for d in listed)
    assert [d.reason for d in await atransport.dead_letters(2)] == ["r0", "r1"]
    assert (await atransport.stats()).dead_letters == 5
    assert (await atransport.stats()).messages == 0


@pytest.mark.asyncio  # async-only
async def test_redrive_all_republishes_at_tail(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1), priority=3)
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.dead_letter(lease, "retry later")
    assert await atransport.redrive() == 1
    assert await atransport.dead_letters() == []
    assert (await atransport.stats()).dead_letters == 0
    second = await _claim(atransport, min_priority=3)
    assert _n(second) == 2
    assert await atransport.ack(second)
    # The group drained above, so the redriven message re-creates it with its recorded priority.
    back = await _claim(atransport, min_priority=3)
    assert back.event == lease.event
    assert (back.priority, back.attempt) == (3, 1)
    assert await atransport.ack(back)
    assert await atransport.claim() is None


@pytest.mark.asyncio  # async-only
async def test_redrive_selected_ids(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    harness.require("dead_letters")
    for i in range(3):
        await atransport.publish(f"g{i}", _ev(i))
    for _ in range(3):
        lease = await _claim(atransport)
        assert await atransport.dead_letter(lease, "x")
    dead = await atransport.dead_letters()
    unknown = max(d.id for d in dead) + 1000
    assert await atransport.redrive([dead[2].id, unknown, dead[0].id]) == 2
    assert [d.id for d in await atransport.dead_letters()] == [dead[1].id]
    assert sorted(n for _g, n in await _drain(atransport)) == [0, 2]
    assert await atransport.redrive([]) == 0
    assert await atransport.redrive([unknown]) == 0
    assert await atransport.redrive(None) == 1
    assert await atransport.dead_letters() == []


# -- extend --------------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_extend_keeps_lease_alive_past_first_expiry(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    worker2 = await harness.make(queue=atransport.queue)
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport, 2 * u)
    await harness.advance(u)
    extended = await atransport.extend(lease, 3 * u)
    assert extended is not None
    await harness.advance(1.5 * u)  # past the first expiry, inside the extension
    assert await worker2.claim(u) is None
    assert (await atransport.stats()).in_flight == 1
    assert await atransport.ack(extended)
    assert await worker2.claim() is None


@pytest.mark.asyncio  # async-only
async def test_extend_returns_same_lease_with_new_expiry(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1))
    lease = await _claim(atransport, 10.0)
    await harness.advance(0.01)
    before = harness.now()
    extended = await atransport.extend(lease, 100.0)
    assert extended is not None
    assert (extended.token, extended.message_id, extended.attempt) == (
        lease.token,
        lease.message_id,
        lease.attempt,
    )
    assert extended.event == lease.event
    assert extended.expires_at > lease.expires_at
    if harness.fake_time:
        assert extended.expires_at == pytest.approx(before + 100.0, abs=1e-3)
    # The original lease object stays valid: fencing is by token, not by expiry.
    assert await atransport.ack(lease)


# -- refused input -------------------------------------------------------------------------

BAD_GROUP_IDS: list[Any] = ["", "x" * 513, "é" * 257, "a\x00b", 5, None, b"bytes"]
BAD_PRIORITIES: list[Any] = [-1, 5, 1.5, "1", True, None]
BAD_SECONDS: list[Any] = [-1, -0.001, math.nan, math.inf, -math.inf, "1", None, True]
BAD_N: list[Any] = [0, -1, 1.5, "2", None, True]


async def _busy_queue(transport: AsyncTransport) -> Lease:
    """Publish a little and hold one lease, so refused calls have state to leave alone."""
    await transport.publish("keep-a", _ev(1))
    await transport.publish("keep-a", _ev(2))
    await transport.publish("keep-b", _ev(3))
    lease = await _claim(transport)
    assert lease.group_id == "keep-a"
    return lease


async def _assert_untouched(
    transport: AsyncTransport, lease: Lease, before: tuple[QueueStats, list[DeadLetter]]
) -> None:
    assert await _snapshot(transport) == before
    assert await transport.ack(lease)
    assert sorted(await _drain(transport)) == [("keep-a", 2), ("keep-b", 3)]


@pytest.mark.asyncio  # async-only
@pytest.mark.parametrize("group_id", BAD_GROUP_IDS)
async def test_bad_group_id_is_refused(atransport: AsyncTransport, group_id: Any) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.publish(group_id, _ev())
    with pytest.raises(InvalidInput):
        await atransport.publish_many([("fine", _ev()), (group_id, _ev())])
    with pytest.raises(InvalidInput):
        await atransport.unblock(group_id)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.asyncio  # async-only
async def test_group_id_limits_are_inclusive(atransport: AsyncTransport) -> None:
    longest = "é" * 256  # 512 UTF-8 bytes
    await atransport.publish(longest, _ev(1))
    await atransport.publish("x" * 512, _ev(2))
    await atransport.publish("🦆 ü ∑ \t\n", _ev(3))
    drained = await _drain(atransport)
    assert sorted(n for _g, n in drained) == [1, 2, 3]
    assert {g for g, _n in drained} == {longest, "x" * 512, "🦆 ü ∑ \t\n"}


@pytest.mark.asyncio  # async-only
@pytest.mark.parametrize("priority", BAD_PRIORITIES)
async def test_bad_priority_is_refused(atransport: AsyncTransport, priority: Any) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.publish("g", _ev(), priority=priority)
    with pytest.raises(InvalidInput):
        await atransport.publish_many([("g", _ev())], priority=priority)
    with pytest.raises(InvalidInput):
        await atransport.claim(min_priority=priority)
    with pytest.raises(InvalidInput):
        await atransport.claim_many(2, min_priority=priority)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.asyncio  # async-only
@pytest.mark.parametrize("seconds", BAD_SECONDS)
async def test_bad_visibility_or_delay_is_refused(atransport: AsyncTransport, seconds: Any) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.claim(seconds)
    with pytest.raises(InvalidInput):
        await atransport.claim_many(2, seconds)
    with pytest.raises(InvalidInput):
        await atransport.extend(lease, seconds)
    with pytest.raises(InvalidInput):
        await atransport.nack(lease, delay=seconds)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.asyncio  # async-only
@pytest.mark.parametrize("n", BAD_N)
async def test_bad_batch_size_is_refused(atransport: AsyncTransport, n: Any) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.claim_many(n)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.asyncio  # async-only
async def test_lease_from_another_queue_is_refused(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    lease = await _busy_queue(atransport)
    other = await harness.make()
    await other.publish("keep-a", _ev(1))
    foreign = await _claim(other)
    assert foreign.group_id == lease.group_id
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        await atransport.ack(foreign)
    with pytest.raises(InvalidInput):
        await atransport.ack_many([lease, foreign])
    with pytest.raises(InvalidInput):
        await atransport.nack(foreign)
    with pytest.raises(InvalidInput):
        await atransport.extend(foreign, 60.0)
    with pytest.raises(InvalidInput):
        await atransport.dead_letter(foreign, "no")
    await _assert_untouched(atransport, lease, before)
    assert await other.ack(foreign)


@pytest.mark.asyncio  # async-only
async def test_lease_from_another_transport_is_refused(atransport: AsyncTransport) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    forged = [
        lease.model_copy(update={"origin": lease.origin + "-elsewhere"}),
        lease.model_copy(update={"queue": lease.queue + "x"}),
    ]
    for bad in forged:
        with pytest.raises(InvalidInput):
            await atransport.ack(bad)
        with pytest.raises(InvalidInput):
            await atransport.nack(bad)
        with pytest.raises(InvalidInput):
            await atransport.extend(bad, 60.0)
        with pytest.raises(InvalidInput):
            await atransport.dead_letter(bad, "no")
    not_leases: list[Any] = [None, "lease", lease.model_dump()]
    for not_a_lease in not_leases:
        with pytest.raises(InvalidInput):
            await atransport.ack(not_a_lease)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.asyncio  # async-only
async def test_non_json_event_is_refused(atransport: AsyncTransport) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    with pytest.raises(InvalidInput):
        Event(kind="k", data={"x": math.nan})
    with pytest.raises(InvalidInput):
        Event(kind="k", data={"when": object()})
    # model_construct skips validation, as a careless caller's subclass might.
    sneaky = [
        Event.model_construct(kind="k", data={"x": math.inf}),
        Event.model_construct(kind="k", data={"x": {1, 2}}),
        Event.model_construct(kind="k", data={1: "int key"}),
    ]
    for event in sneaky:
        with pytest.raises(InvalidInput):
            await atransport.publish("g", event)
        with pytest.raises(InvalidInput):
            await atransport.publish_many([("g", _ev()), ("g", event)])
    not_events: list[Any] = [{"kind": "k"}, "text", None]
    for not_an_event in not_events:
        with pytest.raises(InvalidInput):
            await atransport.publish("g", not_an_event)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.asyncio  # async-only
async def test_bad_batches_are_refused(atransport: AsyncTransport) -> None:
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    batches: list[Any] = ["ab", 5, [("g",)], [("g", _ev(), 1)], [["g", _ev()]], [(_ev(), "g")]]
    for items in batches:
        with pytest.raises(InvalidInput):
            await atransport.publish_many(items)
    await _assert_untouched(atransport, lease, before)


@pytest.mark.asyncio  # async-only
async def test_bad_dead_letter_arguments_are_refused(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    lease = await _busy_queue(atransport)
    before = await _snapshot(atransport)
    reasons: list[Any] = [None, 5, "a\x00b", "r" * 2001]
    limits: list[Any] = [0, -1, "5", None]
    id_lists: list[Any] = ["12", 5, ["1"], [1.5]]
    for reason in reasons:
        with pytest.raises(InvalidInput):
            await atransport.dead_letter(lease, reason)
    for limit in limits:
        with pytest.raises(InvalidInput):
            await atransport.dead_letters(limit)
    for ids in id_lists:
        with pytest.raises(InvalidInput):
            await atransport.redrive(ids)
    await _assert_untouched(atransport, lease, before)


# -- stats ---------------------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_stats_counts_every_state(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    u = harness.unit
    q = await harness.make(max_attempts=1, on_exhausted="block")
    t0 = harness.now()
    await q.publish_many([("flight", _ev(1)), ("flight", _ev(2)), ("park", _ev(3))])
    await q.publish_many([("block", _ev(4)), ("idle", _ev(5)), ("dead", _ev(6))])
    await harness.advance(0.5 * u)
    got = {lease.group_id: lease for lease in await q.claim_many(10, 10 * u)}
    assert set(got) == {"flight", "park", "block", "idle", "dead"}
    assert await q.nack(got["park"], delay=5 * u)
    assert await q.nack(got["block"])
    assert await q.ack(got["idle"])
    assert await q.dead_letter(got["dead"], "bad")
    assert await q.claim() is None  # blocks "block" (its head is exhausted)
    stats = await q.stats()
    assert stats.groups == 3
    assert stats.messages == 4
    assert stats.in_flight == 1
    assert stats.parked == 1
    assert stats.blocked == 1
    assert stats.dead_letters == 1
    assert stats.oldest_age_s is not None
    assert stats.next_resume_at is not None
    if harness.fake_time:
        assert stats.oldest_age_s == pytest.approx(harness.now() - t0, abs=1e-3)
        assert stats.next_resume_at == pytest.approx(t0 + 5.5 * u, abs=1e-3)
    else:
        assert stats.oldest_age_s >= 0.0


@pytest.mark.asyncio  # async-only
async def test_stats_age_grows_with_time(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    await atransport.publish("g", _ev())
    first = (await atransport.stats()).oldest_age_s
    assert first is not None
    await harness.advance(harness.unit)
    later = (await atransport.stats()).oldest_age_s
    assert later is not None
    assert later >= first + 0.9 * harness.unit


@pytest.mark.asyncio  # async-only
async def test_expired_lease_is_not_counted_in_flight(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev())
    await _claim(atransport, harness.unit)
    assert (await atransport.stats()).in_flight == 1
    await harness.advance(1.5 * harness.unit)
    stats = await atransport.stats()
    assert (stats.in_flight, stats.parked, stats.groups) == (0, 0, 1)


# -- workers and queues --------------------------------------------------------------------


@pytest.mark.asyncio  # async-only
async def test_second_worker_shares_the_queue(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    worker2 = await harness.make(queue=atransport.queue)
    assert worker2.queue == atransport.queue
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(worker2)
    assert await atransport.claim() is None
    assert await atransport.ack(lease)  # a lease is valid on any worker of the queue
    assert _n(await _claim(atransport)) == 2


@pytest.mark.asyncio  # async-only
async def test_queues_are_isolated(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    other = await harness.make()
    assert other.queue != atransport.queue
    await atransport.publish("g", _ev(1))
    assert await other.claim() is None
    assert (await other.stats()).messages == 0
    await other.publish("g", _ev(2))
    assert [n for _g, n in await _drain(atransport)] == [1]
    assert [n for _g, n in await _drain(other)] == [2]


# -- Event round trip ----------------------------------------------------------------------


async def _round_trip(transport: AsyncTransport, event: Event, group: str = "g") -> Event:
    await transport.publish(group, event)
    lease = await _claim(transport)
    assert await transport.ack(lease)
    assert lease.group_id == group
    assert lease.event == event
    assert lease.event.to_json() == event.to_json()
    return lease.event


@pytest.mark.asyncio  # async-only
async def test_event_round_trip_unicode(atransport: AsyncTransport) -> None:
    text = "héllo wörld — 日本語 — العربية — 🦆🏳️‍🌈 — e\u0301 — \u2028 \t \\ \" '"
    event = Event(
        id="ünï-🆔",
        kind="kïnd ✓",
        data={"text": text, text: [text]},
        headers={"x-ünicode": text, "trace": "🦆"},
    )
    got = await _round_trip(atransport, event, group="grüppe-🦆")
    assert isinstance(got.data, dict)
    assert got.data["text"] == text


@pytest.mark.asyncio  # async-only
async def test_event_round_trip_nested_data(atransport: AsyncTransport) -> None:
    data: Any = {
        "null": None,
        "bools": [True, False],
        "ints": [0, -1, 2**53 - 1, -(2**53) + 1],
        "floats": [0.1, -2.5, 1e-7, 1.5e300],
        "empty": {"list": [], "obj": {}, "str": ""},
        "deep": {"a": [{"b": [{"c": [1, [2, [3, {"d": "e"}]]]}]}]},
    }
    await _round_trip(atransport, Event(kind="nested", data=data))


@pytest.mark.asyncio  # async-only
@pytest.mark.parametrize("data", [None, 0, 3.25, "just text", [1, "two", None], True])
async def test_event_round_trip_scalar_data(atransport: AsyncTransport, data: Any) -> None:
    await _round_trip(atransport, Event(kind="scalar", data=data))


@pytest.mark.asyncio  # async-only
async def test_event_round_trip_one_mebibyte(atransport: AsyncTransport) -> None:
    blob = ("0123456789abcdef" * 65536)[: 1 << 20]
    event = Event(kind="big", data={"blob": blob, "tail": "ü" * 1000})
    got = await _round_trip(atransport, event)
    assert isinstance(got.data, dict)
    assert got.data["blob"] == blob


@pytest.mark.asyncio  # async-only
async def test_event_round_trip_keeps_id_and_time(atransport: AsyncTransport) -> None:
    local = timezone(timedelta(hours=5, minutes=30))
    created = datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=local)
    event = Event(id="fixed-id", kind="k", created_at=created)
    got = await _round_trip(atransport, event)
    assert got.id == "fixed-id"
    assert got.created_at == created
    assert got.created_at.utcoffset() == timedelta(0)
    assert got.created_at.microsecond == 123456


# -- the model agrees ----------------------------------------------------------------------


def _ids_at(dead: list[DeadLetter], indices: tuple[int, ...]) -> list[int]:
    """Return the ids of the dead letters at *indices*; -1 (never an id) for a missing one."""
    return [dead[i].id if 0 <= i < len(dead) else -1 for i in indices]


async def _run_program(
    transport: AsyncTransport,
    clock: FakeClock,
    policy: Policy,
    program: list[Op],
    groups: tuple[str, ...] = GROUPS,
    events: Callable[[int, int], Event] = event_for,
) -> None:
    """Run *program* on *transport* and on a fresh QueueModel; fail at the first difference.

    *groups* are the group ids the program's group indices name and *events* makes the event
    of step and index: the fuzz tests pass hostile ones (``pgque.conformance.fuzz``).
    """
    model = QueueModel(
        queue=transport.queue,
        origin="model",
        max_attempts=policy.max_attempts,
        on_exhausted=policy.on_exhausted,
    )
    leases: list[tuple[Lease, Lease]] = []
    last_ids: list[int] = []

    def pick(ref: int) -> tuple[Lease, Lease] | None:
        return leases[-1 - ref % len(leases)] if leases else None

    def keep(got: list[Lease], want: list[Lease]) -> None:
        assert [lease_view(x) for x in got] == [lease_view(x) for x in want]
        leases.extend(zip(got, want, strict=True))

    for step, op in enumerate(program):
        now = clock()
        where = f"step {step}: {op}"
        if op.name == "publish":
            group, priority = op.args
            event = events(step, 0)
            message_id = await transport.publish(groups[group], event, priority=priority)
            model.publish(groups[group], event.to_json(), priority, now)
            last_ids.append(message_id)
        elif op.name == "publish_many":
            refs, priority = op.args
            items = [(groups[g], events(step, i)) for i, g in enumerate(refs)]
            ids = await transport.publish_many(items, priority=priority)
            for g, event in items:
                model.publish(g, event.to_json(), priority, now)
            assert ids == sorted(ids), where
            last_ids.extend(ids)
        elif op.name == "claim":
            visibility, min_priority = op.args
            got = await transport.claim(visibility, min_priority=min_priority)
            want = model.claim(now, visibility, min_priority)
            assert lease_view(got) == lease_view(want), where
            if got is not None and want is not None:
                leases.append((got, want))
        elif op.name == "claim_many":
            n, visibility, min_priority = op.args
            got_many = await transport.claim_many(n, visibility, min_priority=min_priority)
            keep(got_many, model.claim_many(n, now, visibility, min_priority))
        elif op.name in {"ack", "nack", "extend", "dead_letter"}:
            pair = pick(op.args[0])
            if pair is None:
                continue
            held, shadow = pair
            if op.name == "ack":
                assert await transport.ack(held) == model.ack(shadow, now), where
            elif op.name == "nack":
                delay = op.args[1]
                assert await transport.nack(held, delay=delay) == model.nack(shadow, now, delay), (
                    where
                )
            elif op.name == "extend":
                visibility = op.args[1]
                renewed = await transport.extend(held, visibility)
                expected = model.extend(shadow, now, visibility)
                assert lease_view(renewed) == lease_view(expected), where
                if renewed is not None and expected is not None:
                    leases.append((renewed, expected))
            else:
                assert await transport.dead_letter(held, "program") == model.dead_letter(
                    shadow, now, "program"
                ), where
        elif op.name == "ack_many":
            pairs = [p for p in (pick(ref) for ref in op.args[0]) if p is not None]
            results = await transport.ack_many([held for held, _ in pairs])
            assert results == [model.ack(shadow, now) for _, shadow in pairs], where
        elif op.name == "redrive":
            (indices,) = op.args
            if indices is None:
                assert await transport.redrive(None) == model.redrive(None, now), where
            else:
                got_ids = _ids_at(await transport.dead_letters(1000), indices)
                want_ids = _ids_at(model.dead_letters(1000), indices)
                assert await transport.redrive(got_ids) == model.redrive(want_ids, now), where
        elif op.name == "unblock":
            group, drop_head = op.args
            assert await transport.unblock(groups[group], drop_head=drop_head) == model.unblock(
                groups[group], now, drop_head
            ), where
        elif op.name == "advance":
            clock.advance(op.args[0])
        elif op.name == "stats":
            assert stats_view(await transport.stats()) == stats_view(model.stats(now)), where
        elif op.name == "dead_letters":
            assert [dead_view(d) for d in await transport.dead_letters(1000)] == [
                dead_view(d) for d in model.dead_letters(1000)
            ], where
        else:  # pragma: no cover - the strategy makes no other names
            raise AssertionError(f"unknown op {op}")
    assert last_ids == sorted(last_ids)
    now = clock()
    assert stats_view(await transport.stats()) == stats_view(model.stats(now))
    assert [dead_view(d) for d in await transport.dead_letters(1000)] == [
        dead_view(d) for d in model.dead_letters(1000)
    ]
    # Finally drain both far in the future: the same messages come out in the same order.
    clock.advance(1000.0)
    now = clock()
    for group_id in groups:
        await transport.unblock(group_id)
        model.unblock(group_id, now, False)
    while True:
        got_lease = await transport.claim(5.0)
        want_lease = model.claim(now, 5.0, 0)
        assert lease_view(got_lease) == lease_view(want_lease)
        if got_lease is None or want_lease is None:
            break
        assert await transport.ack(got_lease)
        assert model.ack(want_lease, now)


@pytest.mark.asyncio  # async-only
@settings(
    max_examples=int(os.environ.get(EXAMPLES_ENV, "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(policy=policies(), program=programs())
async def test_transport_agrees_with_reference_model(
    atransport: AsyncTransport, harness: AsyncHarness, policy: Policy, program: list[Op]
) -> None:
    for flag in ("injected_clock", "priorities", "dead_letters"):
        harness.require(flag)
    clock = FakeClock()
    transport = await harness.make(
        clock=clock, max_attempts=policy.max_attempts, on_exhausted=policy.on_exhausted
    )
    await _run_program(transport, clock, policy, program)


# The concurrency test is hand-written per flavour: tasks for asyncio, threads for blocking.
_CONCURRENCY = test_concurrent_drain_tasks

# Computed, so a new test cannot be left out of ``import *``.
__all__ = [
    "harness",
    "atransport",
    "pgque_conformance_known_gaps",
    *sorted(name for name in dict(globals()) if name.startswith("test_")),
]
