"""Fairness keys: shares between keys, weights, caps, rates, and the key policies.

Gated on ``Capabilities.fairness`` (docs/fairness.md), except the first test: a transport
without it refuses a fairness key. Claims share the workers between keys first (start-time
fair queueing, ties to the heavier key, then the key's name), then between a key's groups
round-robin; a key's share does not grow with its number of groups.
"""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from collections import Counter

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import _claim, _ev, _info
from pgque.core import (
    AsyncSupportsFairness,
    AsyncTransport,
    ConfigurationError,
    InvalidInput,
    KeyPolicy,
)

# -- helpers -------------------------------------------------------------------------------


async def _fair(
    harness: AsyncHarness, *, limits: bool = False
) -> tuple[AsyncTransport, AsyncSupportsFairness]:
    """Open the test's transport; skip unless it declares ``fairness`` and, for a test of
    shares, caps or rates over the whole queue (*limits*), ``global_key_limits`` (off over
    shards, where each shard applies them to its own groups)."""
    transport = await harness.open()
    harness.require("fairness")
    if limits:
        harness.require("global_key_limits")
    assert isinstance(transport, AsyncSupportsFairness)
    return transport, transport


async def _fill(t: AsyncTransport, key: str | None, groups: int, each: int) -> None:
    """Publish *each* messages to each of *groups* groups named ``<key>-<i>`` under *key*."""
    name = key or "nokey"
    for i in range(groups):
        items = [(f"{name}-{i}", _ev(j)) for j in range(each)]
        await t.publish_many(items, fairness_key=key)


def _key_of(group_id: str) -> str:
    return group_id.rsplit("-", 1)[0]


async def _serve(t: AsyncTransport, claims: int) -> list[str]:
    """Claim and ack one message at a time, *claims* times; return each lease's key."""
    served: list[str] = []
    for _ in range(claims):
        lease = await _claim(t)
        served.append(_key_of(lease.group_id))
        assert await t.ack(lease)
    return served


# -- without the capability ------------------------------------------------------------------


async def test_a_transport_without_fairness_refuses_a_key(harness: AsyncHarness) -> None:
    t = await harness.open()
    if harness.capabilities.fairness:
        pytest.skip("the transport declares fairness: the refusal is for those that do not")
    with pytest.raises(ConfigurationError, match="fairness"):
        await t.publish("g", _ev(1), fairness_key="tenant")
    with pytest.raises(ConfigurationError, match="fairness"):
        await t.publish_many([("g", _ev(1))], fairness_key="tenant")
    if harness.capabilities.scheduling:
        with pytest.raises(ConfigurationError, match="fairness"):
            await t.publish_tick("nightly", 1000.0, "g", _ev(1), fairness_key="tenant")
        assert await t.last_tick("nightly") is None
    assert (await t.stats()).messages == 0
    # No key is no change.
    await t.publish("g", _ev(1), fairness_key=None)
    assert (await t.stats()).messages == 1


# -- shares --------------------------------------------------------------------------------


async def test_a_keys_share_does_not_grow_with_its_groups(harness: AsyncHarness) -> None:
    t, _ = await _fair(harness, limits=True)
    await _fill(t, "wide", groups=20, each=2)  # key splitting: many groups
    await _fill(t, "narrow", groups=2, each=20)
    served = await _serve(t, 20)
    counts = Counter(served)
    assert counts == {"wide": 10, "narrow": 10}
    # Alternating, never two ahead at any point.
    for end in range(1, len(served) + 1):
        prefix = Counter(served[:end])
        assert abs(prefix["wide"] - prefix["narrow"]) <= 1, served


async def test_weights_share_the_claims(harness: AsyncHarness) -> None:
    t, fair = await _fair(harness, limits=True)
    await fair.set_key_policy("heavy", weight=3)
    await _fill(t, "heavy", groups=8, each=10)
    await _fill(t, "light", groups=8, each=10)
    counts = Counter(await _serve(t, 40))
    assert counts == {"heavy": 30, "light": 10}


async def test_weights_share_a_batch_claim(harness: AsyncHarness) -> None:
    t, fair = await _fair(harness, limits=True)
    await fair.set_key_policy("heavy", weight=3)
    await _fill(t, "heavy", groups=10, each=1)
    await _fill(t, "light", groups=10, each=1)
    leases = await t.claim_many(8)
    assert Counter(_key_of(lease.group_id) for lease in leases) == {"heavy": 6, "light": 2}


async def test_groups_without_a_key_share_the_default_key(harness: AsyncHarness) -> None:
    t, _ = await _fair(harness, limits=True)
    await _fill(t, None, groups=10, each=1)
    await _fill(t, "tenant", groups=1, each=10)
    counts = Counter(await _serve(t, 10))
    assert counts == {"nokey": 5, "tenant": 5}


async def test_a_key_back_from_idle_gets_no_burst(harness: AsyncHarness) -> None:
    t, _ = await _fair(harness, limits=True)
    await _fill(t, "busy", groups=4, each=20)
    await _serve(t, 30)  # only "busy" has work: it is served alone
    await _fill(t, "late", groups=4, each=20)
    served = await _serve(t, 20)
    assert Counter(served) == {"busy": 10, "late": 10}


async def test_priorities_come_before_keys(harness: AsyncHarness) -> None:
    t, _ = await _fair(harness)
    harness.require("priorities")
    await t.publish("low-0", _ev(1), fairness_key="low")
    await t.publish("high-0", _ev(1), priority=3, fairness_key="high")
    lease = await _claim(t, min_priority=2)
    assert lease.group_id == "high-0"
    assert await t.claim(min_priority=2) is None


# -- a group's key ---------------------------------------------------------------------------


async def test_a_groups_key_is_fixed_while_it_has_messages(harness: AsyncHarness) -> None:
    t, _ = await _fair(harness)
    await t.publish("g", _ev(1), fairness_key="first")
    await t.publish("g", _ev(2), fairness_key="second")
    assert (await _info(t, "g")).fairness_key == "first"
    for _ in range(2):
        assert await t.ack(await _claim(t))
    await t.publish("g", _ev(3), fairness_key="second")
    assert (await _info(t, "g")).fairness_key == "second"
    await t.publish("h", _ev(1))
    assert (await _info(t, "h")).fairness_key is None


async def test_a_tick_publishes_with_its_key(harness: AsyncHarness) -> None:
    t, _ = await _fair(harness)
    harness.require("scheduling")
    assert await t.publish_tick("nightly", 1000.0, "report", _ev(1), fairness_key="ops")
    assert (await _info(t, "report")).fairness_key == "ops"


async def test_a_redriven_message_keeps_its_key(harness: AsyncHarness) -> None:
    t, _ = await _fair(harness)
    harness.require("dead_letters")
    await t.publish("g", _ev(1), fairness_key="tenant")
    assert await t.dead_letter(await _claim(t), "bad")
    assert await t.redrive() == 1
    assert (await _info(t, "g")).fairness_key == "tenant"


# -- caps ------------------------------------------------------------------------------------


async def test_a_cap_bounds_the_keys_leased_groups(harness: AsyncHarness) -> None:
    t, fair = await _fair(harness, limits=True)
    u = harness.unit
    await fair.set_key_policy("capped", max_in_flight=2)
    await _fill(t, "capped", groups=5, each=2)
    await _fill(t, "free", groups=5, each=2)
    leases = await t.claim_many(10, visibility=2 * u)
    counts = Counter(_key_of(lease.group_id) for lease in leases)
    assert counts == {"capped": 2, "free": 5}
    assert await t.claim_many(10, visibility=2 * u) == []
    # Settling one frees one slot.
    held = [lease for lease in leases if _key_of(lease.group_id) == "capped"]
    assert await t.ack(held[0])
    again = await t.claim_many(10, visibility=2 * u)
    assert [_key_of(lease.group_id) for lease in again] == ["capped"]


async def test_an_expired_lease_frees_its_slot(harness: AsyncHarness) -> None:
    """A crashed holder never wedges a key: its slot comes back when its lease expires."""
    t, fair = await _fair(harness, limits=True)
    u = harness.unit
    await fair.set_key_policy("capped", max_in_flight=1)
    await _fill(t, "capped", groups=3, each=1)
    first = await _claim(t, visibility=u)
    assert await t.claim(visibility=u) is None  # at the cap
    [info] = await fair.keys()
    assert (info.key, info.in_flight, info.policy.max_in_flight) == ("capped", 1, 1)
    await harness.advance(1.5 * u)  # the holder "died": its lease expires
    second = await _claim(t, visibility=u)
    assert second.group_id != first.group_id  # the longest-unserved group of the key
    assert await t.claim(visibility=u) is None  # one slot: the new lease holds it
    [info] = await fair.keys()
    assert info.in_flight == 1


async def test_the_default_policy_applies_to_keys_without_one(harness: AsyncHarness) -> None:
    t, fair = await _fair(harness, limits=True)
    await fair.set_key_policy(None, max_in_flight=1)
    await fair.set_key_policy("vip", max_in_flight=3)
    await _fill(t, "vip", groups=4, each=1)
    await _fill(t, "other", groups=4, each=1)
    await _fill(t, None, groups=4, each=1)
    counts = Counter(_key_of(lease.group_id) for lease in await t.claim_many(12))
    assert counts == {"vip": 3, "other": 1, "nokey": 1}


# -- rates -----------------------------------------------------------------------------------


async def test_a_rate_limits_claims_on_the_stores_clock(harness: AsyncHarness) -> None:
    t, fair = await _fair(harness, limits=True)
    harness.require("injected_clock")
    u = harness.unit
    await fair.set_key_policy("slow", rate=2, per=u, burst=2)
    await _fill(t, "slow", groups=6, each=1)
    await _fill(t, "fast", groups=2, each=1)
    counts = Counter(_key_of(lease.group_id) for lease in await t.claim_many(10))
    assert counts == {"slow": 2, "fast": 2}  # the burst, then no token
    assert await t.claim_many(10) == []  # skipped, not claimed and given back
    [fast_info, slow_info] = await fair.keys()
    assert (slow_info.key, fast_info.key) == ("slow", "fast")
    assert slow_info.tokens is not None
    assert slow_info.tokens < 1
    assert slow_info.next_token_at == pytest.approx(harness.now() + u / 2, abs=1e-3)
    assert fast_info.tokens is None
    await harness.advance(u / 2)  # one token back
    assert [_key_of(lease.group_id) for lease in await t.claim_many(10)] == ["slow"]
    assert await t.claim_many(10) == []
    await harness.advance(2 * u)  # the bucket refills up to its burst only
    counts = Counter(_key_of(lease.group_id) for lease in await t.claim_many(10, 60 * u))
    assert counts["slow"] == 2


async def test_a_claim_timed_before_the_last_one_earns_no_tokens_twice(
    harness: AsyncHarness,
) -> None:
    # A claimer takes its "now" before it waits (for a lock, a round trip), so the claim that
    # lands second may carry the earlier time. Its charge must not move the bucket's time back,
    # or the time between the two would refill the bucket a second time.
    t, fair = await _fair(harness, limits=True)
    harness.require("injected_clock")
    u = harness.unit
    await fair.set_key_policy("metered", rate=1, per=u, burst=2)
    await _fill(t, "metered", groups=4, each=1)
    assert len(await t.claim_many(1)) == 1  # a token of 2 left
    harness.clock.advance(-u)  # the second claimer's earlier time
    assert len(await t.claim_many(1)) == 1  # the last token
    harness.clock.advance(u)  # back to the first claim's time
    assert await t.claim_many(1) == []  # no time has passed since it: no token
    await harness.advance(u)
    assert len(await t.claim_many(1)) == 1  # one unit: one token


# -- policies and the keys listing -----------------------------------------------------------


async def test_key_policies_are_stored_read_and_deleted(harness: AsyncHarness) -> None:
    _, fair = await _fair(harness)
    assert await fair.key_policy("tenant") is None
    stored = await fair.set_key_policy("tenant", weight=2.5, max_in_flight=4, rate=10, per=60)
    assert stored == KeyPolicy(weight=2.5, max_in_flight=4, rate=10.0, per=60.0, burst=None)
    assert await fair.key_policy("tenant") == stored
    assert await fair.set_key_policy("tenant", weight=1) == KeyPolicy()
    assert await fair.key_policy("tenant") == KeyPolicy()
    await fair.set_key_policy(None, max_in_flight=9)
    assert await fair.key_policy(None) == KeyPolicy(max_in_flight=9)
    assert await fair.delete_key_policy("tenant")
    assert not await fair.delete_key_policy("tenant")
    assert await fair.delete_key_policy(None)
    assert await fair.key_policy(None) is None


async def test_keys_lists_work_and_policies_in_byte_order(harness: AsyncHarness) -> None:
    t, fair = await _fair(harness)
    await fair.set_key_policy("zeta", weight=2)  # a policy and no work yet
    await _fill(t, "beta", groups=2, each=3)
    await _fill(t, None, groups=1, each=1)
    await _fill(t, "alpha", groups=1, each=2)
    lease = await t.claim_many(1)
    assert _key_of(lease[0].group_id) in {"alpha", "beta", "nokey"}
    keys = await fair.keys()
    assert [k.key for k in keys] == ["", "alpha", "beta", "zeta"]
    by_key = {k.key: k for k in keys}
    assert (by_key["beta"].groups, by_key["beta"].messages) == (2, 6)
    assert (by_key["alpha"].groups, by_key["alpha"].messages) == (1, 2)
    assert (by_key["zeta"].own_policy, by_key["zeta"].policy.weight) == (True, 2)
    assert (by_key["zeta"].groups, by_key["zeta"].messages) == (0, 0)
    assert not by_key["beta"].own_policy
    assert sum(k.in_flight for k in keys) == 1
    assert by_key["beta"].oldest_age_s is not None
    page = await fair.keys(2)
    assert [k.key for k in page] == ["", "alpha"]
    rest = await fair.keys(2, after=page[-1].key)
    assert [k.key for k in rest] == ["beta", "zeta"]
    assert await fair.keys(5, after="zeta") == []


async def test_bad_fairness_arguments_are_refused(harness: AsyncHarness) -> None:
    t, fair = await _fair(harness)
    for key in ["", " ", "a\x00b", "x" * 201, 7, b"k"]:
        with pytest.raises(InvalidInput):
            await t.publish("g", _ev(1), fairness_key=key)  # type: ignore[arg-type]
    for bad in [
        {"weight": 0},
        {"weight": -1},
        {"weight": float("inf")},
        {"weight": True},
        {"max_in_flight": 0},
        {"max_in_flight": 1.5},
        {"rate": 0},
        {"rate": 5, "per": 0},
        {"burst": 3},  # a burst needs a rate
        {"rate": 1, "burst": 0},
    ]:
        with pytest.raises(InvalidInput):
            await fair.set_key_policy("k", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await fair.keys(0)
    assert await fair.key_policy("k") is None
    assert (await t.stats()).messages == 0
