"""The fairness rules (pgque.core.fairness) and the model's shares, caps and rates."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgque.core import InvalidInput, KeyPolicy
from pgque.core.fairness import (
    DEFAULT_KEY,
    check_fairness_key,
    check_keys_page,
    check_policy_key,
    claim_rank,
    effective_burst,
    finish_tag,
    key_policy,
    next_token_at,
    policy_text,
    refill,
    start_tag,
)
from pgque.core.queue_model import QueueModel

_EVENT = '{"kind":"k","data":null}'


def test_start_and_finish_tags() -> None:
    assert start_tag(3.0, 1.0) == 3.0
    assert start_tag(0.5, 2.0) == 2.0  # back from idle: no credit
    assert finish_tag(2.0, 4.0) == 2.25


def test_claim_rank_orders_by_start_then_finish_then_key_bytes() -> None:
    clock = 5.0
    ranks = sorted(
        [
            (claim_rank(7.0, clock, "a"), "late"),
            (claim_rank(1.0, clock, "z"), "waited-longest"),
            (claim_rank(3.0, clock, "b"), "waited"),
            (claim_rank(3.0, clock, "a"), "waited-name"),
        ]
    )
    assert [name for _rank, name in ranks] == ["waited-longest", "waited-name", "waited", "late"]
    assert claim_rank(0.0, 0.0, "B") < claim_rank(0.0, 0.0, "a")  # byte order: "B" < "a"


def test_token_bucket() -> None:
    policy = key_policy(rate=2, per=10, burst=4)
    assert effective_burst(policy) == 4
    assert refill(policy, None, None, 100.0) == 4  # a new bucket is full
    assert refill(policy, 0.0, 100.0, 105.0) == pytest.approx(1.0)
    assert refill(policy, 0.0, 100.0, 1000.0) == 4  # never above the burst
    assert refill(policy, 1.0, 100.0, 90.0) == 1.0  # a clock gone back adds nothing
    assert next_token_at(policy, 0.5, 100.0) == pytest.approx(102.5)
    assert next_token_at(policy, 1.0, 100.0) is None
    unlimited = key_policy()
    assert effective_burst(unlimited) == math.inf
    assert next_token_at(unlimited, 0.0, 1.0) is None
    assert effective_burst(key_policy(rate=2.5)) == 3  # ceil(rate) by default
    assert effective_burst(key_policy(rate=0.1)) == 1


def test_key_policy_checks() -> None:
    assert key_policy() == KeyPolicy()
    assert key_policy(weight=2, max_in_flight=3, rate=1.5, per=60, burst=2) == KeyPolicy(
        weight=2.0, max_in_flight=3, rate=1.5, per=60.0, burst=2
    )
    bads: list[dict[str, object]] = [
        {"weight": 0},
        {"weight": float("nan")},
        {"weight": 2_000_000},
        {"weight": "1"},
        {"max_in_flight": True},
        {"max_in_flight": 0},
        {"rate": -1},
        {"rate": 1, "per": 86_401},
        {"burst": 2},
        {"rate": 1, "burst": 1.0},
    ]
    for bad in bads:
        with pytest.raises(InvalidInput):
            key_policy(**bad)


def test_policy_text() -> None:
    assert policy_text(KeyPolicy()) == "weight 1"
    assert policy_text(KeyPolicy(weight=2.5, max_in_flight=5)) == "weight 2.5, cap 5"
    assert policy_text(KeyPolicy(rate=10, per=60)) == "weight 1, 10/60s"
    assert policy_text(KeyPolicy(weight=3, max_in_flight=1, rate=0.5, per=1, burst=2)) == (
        "weight 3, cap 1, 0.5/1s burst 2"
    )


def test_key_checks() -> None:
    assert check_fairness_key(None) is None
    assert check_fairness_key("tenant-7") == "tenant-7"
    assert check_fairness_key("é" * 100) == "é" * 100  # 200 bytes
    for bad in ["", "   ", "\x00", "é" * 101, 3, "\ud800"]:
        with pytest.raises(InvalidInput):
            check_fairness_key(bad)
    assert check_policy_key(None) is None
    assert check_policy_key(DEFAULT_KEY) == ""
    with pytest.raises(InvalidInput):
        check_policy_key(" ")
    assert check_keys_page(10, "") == (10, "")
    assert check_keys_page(1000, None) == (1000, None)
    for limit in [0, 1001, True, 1.0]:
        with pytest.raises(InvalidInput):
            check_keys_page(limit, None)


def _model_with(keys: dict[str, int], groups: int, each: int) -> QueueModel:
    model = QueueModel()
    for key in keys:
        for g in range(groups):
            for _ in range(each):
                model.publish(f"{key}/{g}", _EVENT, 0, 0.0, key)
    for key, weight in keys.items():
        model.set_key_policy(key, key_policy(weight=weight))
    return model


@settings(max_examples=40, deadline=None)
@given(
    weights=st.lists(st.integers(min_value=1, max_value=5), min_size=2, max_size=4),
    groups=st.lists(st.integers(min_value=3, max_value=12), min_size=4, max_size=4),
    batch=st.integers(min_value=1, max_value=3),
)
def test_backlogged_keys_share_claims_by_weight(
    weights: list[int], groups: list[int], batch: int
) -> None:
    """Whatever their number of groups (key splitting), every backlogged key's claims stay
    within one batch of its weight's share, after every batch."""
    keys = {f"k{i}": w for i, w in enumerate(weights)}
    model = QueueModel()
    for i, key in enumerate(keys):
        model.set_key_policy(key, key_policy(weight=keys[key]))
        for g in range(groups[i]):
            for _ in range(200):
                model.publish(f"{key}/{g}", _EVENT, 0, 0.0, key)
    total_weight = sum(weights)
    served: Counter[str] = Counter()
    now = 1.0
    for _ in range(30):
        leases = model.claim_many(batch, now, 30.0, 0)
        assert len(leases) == batch
        for lease in leases:
            served[lease.group_id.split("/")[0]] += 1
            assert model.ack(lease, now)
        now += 1.0
        claims = sum(served.values())
        for key, weight in keys.items():
            assert abs(served[key] - claims * weight / total_weight) <= batch + 1, served


def test_a_cap_counts_live_leases_only() -> None:
    model = _model_with({"a": 1}, groups=3, each=1)
    model.set_key_policy("a", key_policy(max_in_flight=2))
    assert len(model.claim_many(3, 0.0, 10.0, 0)) == 2
    assert model.claim_many(3, 5.0, 10.0, 0) == []
    # Both leases expire at 10: the slots come back without any settlement.
    assert len(model.claim_many(3, 10.0, 10.0, 0)) == 2


def test_a_rate_is_skipped_not_claimed() -> None:
    model = _model_with({"a": 1}, groups=4, each=1)
    model.set_key_policy("a", key_policy(rate=1, per=10))
    assert len(model.claim_many(4, 0.0, 100.0, 0)) == 1
    assert model.claim_many(4, 5.0, 100.0, 0) == []
    [info] = model.keys_page(5.0, 10, None)
    assert info.tokens == pytest.approx(0.5)
    assert info.next_token_at == pytest.approx(10.0)
    head = model.groups["a/1"].messages[0]
    assert head.attempts == 0  # passed over: no attempt counted
    assert len(model.claim_many(4, 10.0, 100.0, 0)) == 1


def test_purge_forgets_history_and_keeps_policies() -> None:
    model = _model_with({"a": 2}, groups=1, each=2)
    model.claim_many(1, 0.0, 10.0, 0)
    model.purge()
    assert model.keys_page(0.0, 10, None)[0].policy.weight == 2
    assert model.keys_page(0.0, 10, None)[0].messages == 0


def test_a_schedule_entry_checks_and_carries_its_key() -> None:
    from pgque.core import InMemoryTransport, Schedule, ScheduleEntry, Scheduler

    with pytest.raises(InvalidInput):
        ScheduleEntry("e", "@hourly", "g", "k", fairness_key="")
    entry = ScheduleEntry("e", "* * * * *", "report", "k", fairness_key="ops")
    queue = InMemoryTransport(clock=lambda: 1_769_860_800.0)
    published = Scheduler(queue, Schedule([entry])).run_once()
    assert len(published) == 1
    info = queue.group("report")
    assert info is not None
    assert info.fairness_key == "ops"
