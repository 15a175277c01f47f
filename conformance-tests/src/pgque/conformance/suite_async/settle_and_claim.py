"""settle_and_claim: finished leases settled and new heads leased in one atomic call."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance._program import dead_view, group_view, lease_view, stats_view
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _n,
    _snapshot,
)
from pgque.core import (
    AsyncTransport,
    GroupInfo,
    InvalidInput,
    Lease,
    Settlement,
    SettleResult,
)
from pgque.core.validation import exhausted_reason


def _raised(exc: BaseException) -> BaseException:
    """Return *exc* after raising and catching it, so it carries a traceback."""
    try:
        raise exc
    except BaseException as caught:
        return caught


async def _info(transport: AsyncTransport, group_id: str) -> GroupInfo:
    info = await transport.group(group_id)
    assert info is not None
    return info


def _groups_of(result: SettleResult) -> list[str]:
    return [lease.group_id for lease in result.leases]


# -- each outcome acts as its single call ------------------------------------------------


async def test_an_ack_settlement_removes_the_message(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    result = await atransport.settle_and_claim([Settlement.ack(lease)], 0)
    assert isinstance(result, SettleResult)
    assert (result.settled, result.leases) == ([True], [])
    info = await _info(atransport, "g")
    assert (info.state, info.depth, info.head_attempts, info.lease_holder) == ("ready", 1, 0, None)
    assert await atransport.ack(lease) is False  # it is gone: the lease holds nothing
    assert [n for _g, n in await _drain(atransport)] == [2]


async def test_a_nack_settlement_with_a_delay_parks_the_group(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    start = harness.now()
    result = await atransport.settle_and_claim([Settlement.nack(lease, delay=2 * u)], 5)
    assert result.settled == [True]
    assert result.leases == []  # parked: not even this call's claim takes it
    info = await _info(atransport, "g")
    assert (info.state, info.depth, info.head_attempts) == ("parked", 2, 1)
    assert info.resume_at is not None
    if harness.fake_time:
        assert info.resume_at == pytest.approx(start + 2 * u, abs=1e-3)
    stats = await atransport.stats()
    assert (stats.parked, stats.in_flight) == (1, 0)
    await harness.advance(u)
    assert await atransport.claim() is None
    await harness.advance(1.5 * u)
    again = await _claim(atransport)
    assert (_n(again), again.attempt) == (1, 2)


async def test_a_nack_settlement_records_its_error(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    first = await _claim(atransport)
    result = await atransport.settle_and_claim(
        [Settlement.nack(first, error=_raised(ValueError("bad sku")))], 0
    )
    assert result.settled == [True]
    error = (await _info(atransport, "g")).last_error
    assert error is not None
    assert (error.type, error.message) == ("ValueError", "bad sku")
    assert error.traceback is not None
    assert error.traceback.rstrip().endswith("ValueError: bad sku")
    # Without a delay the group is claimable at once: this call's claim takes its head again.
    second = await _claim(atransport)
    result = await atransport.settle_and_claim([Settlement.nack(second, error="upstream 503")], 1)
    assert result.settled == [True]
    [third] = result.leases
    assert (_n(third), third.attempt) == (1, 3)
    info = await _info(atransport, "g")
    assert info.last_error is not None
    assert (info.last_error.type, info.last_error.message) == ("error", "upstream 503")
    assert info.head_attempts == 3
    # A nack without an error keeps the recorded one.
    assert (await atransport.settle_and_claim([Settlement.nack(third)], 0)).settled == [True]
    kept = (await _info(atransport, "g")).last_error
    assert kept is not None
    assert kept.message == "upstream 503"


async def test_a_dead_letter_settlement_keeps_reason_and_error(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    exc = _raised(KeyError("sku-9"))
    result = await atransport.settle_and_claim(
        [Settlement.dead_letter(lease, "rejected", error=exc)], 1
    )
    assert result.settled == [True]
    [dead] = await atransport.dead_letters()
    assert (dead.group_id, dead.message_id, dead.reason, dead.attempts) == (
        "g",
        lease.message_id,
        "rejected",
        1,
    )
    assert dead.event == lease.event
    assert dead.error is not None
    assert (dead.error.type, dead.error.message) == ("KeyError", "'sku-9'")
    # The group continues: its next message was leased by the same call.
    [nxt] = result.leases
    assert (nxt.group_id, _n(nxt), nxt.attempt) == ("g", 2, 1)


async def test_a_dead_letter_settlement_without_error_keeps_the_recorded_one(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error="recorded")
    lease = await _claim(atransport)
    result = await atransport.settle_and_claim([Settlement.dead_letter(lease, "gave up")], 0)
    assert result.settled == [True]
    [dead] = await atransport.dead_letters()
    assert (dead.reason, dead.attempts) == ("gave up", 2)
    assert dead.error is not None
    assert dead.error.message == "recorded"
    assert await atransport.group("g") is None  # drained: removed


async def test_a_release_settlement_does_not_count_the_attempt(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    assert await atransport.nack(await _claim(atransport), error="first failure")
    lease = await _claim(atransport, holder="shutting-down")
    assert lease.attempt == 2
    result = await atransport.settle_and_claim([Settlement.release(lease)], 0)
    assert (result.settled, result.leases) == ([True], [])
    info = await _info(atransport, "g")
    assert (info.state, info.head_attempts, info.lease_holder) == ("ready", 1, None)
    assert info.last_error is not None
    assert info.last_error.message == "first failure"
    # Released and claimed in one call: the same message at the same attempt, a new token.
    again = await _claim(atransport)
    assert again.attempt == 2
    result = await atransport.settle_and_claim([Settlement.release(again)], 1)
    assert result.settled == [True]
    [third] = result.leases
    assert (third.message_id, third.attempt) == (lease.message_id, 2)
    assert third.token not in {lease.token, again.token}


# -- fencing of the settled part -----------------------------------------------------------


async def test_a_stale_token_is_fenced_and_the_rest_applies(
    atransport: AsyncTransport,
) -> None:
    for group_id in ("a", "b", "c"):
        await atransport.publish(group_id, _ev(f"{group_id}1"))
        await atransport.publish(group_id, _ev(f"{group_id}2"))
    leases = {lease.group_id: lease for lease in await atransport.claim_many(3)}
    forged = leases["a"].model_copy(update={"token": "0" * len(leases["a"].token)})
    other_message = leases["c"].model_copy(update={"message_id": leases["c"].message_id + 1})
    result = await atransport.settle_and_claim(
        [
            Settlement.ack(forged),
            Settlement.ack(leases["b"]),
            Settlement.dead_letter(other_message, "never"),
            Settlement.nack(leases["c"], error="slow"),
        ],
        5,
    )
    assert result.settled == [False, True, False, True]
    # b's next message and c's head again; a is still leased by its real holder.
    assert sorted((lease.group_id, _n(lease)) for lease in result.leases) == [
        ("b", "b2"),
        ("c", "c1"),
    ]
    info = await _info(atransport, "a")
    assert (info.state, info.depth, info.head_attempts) == ("leased", 2, 1)
    assert (await atransport.stats()).dead_letters == 0
    assert await atransport.ack(leases["a"])


async def test_an_expired_lease_taken_over_is_fenced(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    u = harness.unit
    await atransport.publish("g", _ev(1))
    short = await _claim(atransport, u)
    await harness.advance(2 * u)
    taker = await _claim(atransport)  # its lease expired: the group is taken over
    assert (taker.group_id, taker.attempt) == ("g", 2)
    await atransport.publish("h", _ev(2))
    claimed: list[list[str]] = []
    for late in (
        Settlement.ack(short),
        Settlement.nack(short, delay=u, error="too late"),
        Settlement.release(short),
        Settlement.dead_letter(short, "too late"),
    ):
        result = await atransport.settle_and_claim([late], 1)
        assert result.settled == [False]
        claimed.append(_groups_of(result))
    assert claimed == [["h"], [], [], []]  # the claim still ran
    info = await _info(atransport, "g")
    assert (info.state, info.depth, info.head_attempts, info.last_error) == (
        "leased",
        1,
        2,
        None,
    )
    assert await atransport.dead_letters() == []
    assert (await atransport.settle_and_claim([Settlement.ack(taker)], 0)).settled == [True]
    assert await atransport.group("g") is None


async def test_the_same_lease_twice_in_one_call(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    result = await atransport.settle_and_claim([Settlement.ack(lease), Settlement.ack(lease)], 0)
    assert result.settled == [True, False]
    assert (await _info(atransport, "g")).depth == 1
    # A nack then a release of one lease: the release finds nothing to give back.
    second = await _claim(atransport)
    result = await atransport.settle_and_claim(
        [Settlement.nack(second), Settlement.release(second)], 0
    )
    assert result.settled == [True, False]
    assert (await _info(atransport, "g")).head_attempts == 1
    third = await _claim(atransport)
    assert (_n(third), third.attempt) == (2, 2)
    # A release then an ack of one lease: the message stays.
    result = await atransport.settle_and_claim(
        [Settlement.release(third), Settlement.ack(third)], 0
    )
    assert result.settled == [True, False]
    assert [n for _g, n in await _drain(atransport)] == [2]


async def test_an_acked_lease_settles_nothing(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.ack(lease)
    before = await _snapshot(atransport)
    groups_before = await atransport.groups()
    late = [Settlement.ack(lease), Settlement.nack(lease, delay=harness.unit, error="late")]
    late.append(Settlement.release(lease))
    if harness.capabilities.dead_letters:
        late.append(Settlement.dead_letter(lease, "late", error="late"))
    result = await atransport.settle_and_claim(late, 0)
    assert result.settled == [False] * len(late)
    assert result.leases == []
    assert await _snapshot(atransport) == before
    assert await atransport.groups() == groups_before
    assert [n for _g, n in await _drain(atransport)] == [2]


# -- the claim part ------------------------------------------------------------------------


async def test_the_claim_leases_at_most_n_distinct_groups(atransport: AsyncTransport) -> None:
    for n in range(3):
        await atransport.publish_many([(f"g{g}", _ev(f"g{g}-{n}")) for g in range(5)])
    first = await atransport.settle_and_claim([], 3)
    assert first.settled == []
    assert len(first.leases) == 3
    assert len(set(_groups_of(first))) == 3
    assert all(lease.attempt == 1 for lease in first.leases)
    rest = await atransport.settle_and_claim([], 10)
    assert len(rest.leases) == 2
    assert sorted(_groups_of(first) + _groups_of(rest)) == [f"g{g}" for g in range(5)]
    assert (await atransport.settle_and_claim([], 10)).leases == []  # every group leased
    # Each group's head comes first, and never two of one group.
    assert all(_n(lease).endswith("-0") for lease in first.leases + rest.leases)
    assert (await atransport.stats()).in_flight == 5


async def test_a_list_of_holders_labels_each_lease_in_claim_order(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    """A worker filling several slots in one call names each: lease i gets holder i."""
    harness.require("global_fairness")
    await atransport.publish_many([(f"g{g}", _ev(f"g{g}-0")) for g in range(4)])
    await atransport.publish("g0", _ev("g0-1"))
    first = await atransport.settle_and_claim([], 3, holder=["h:1:0", "h:1:1", "h:1:queued"])
    assert _groups_of(first) == ["g0", "g1", "g2"]  # never served: by group id
    holders = [(await _info(atransport, g)).lease_holder for g in _groups_of(first)]
    assert holders == ["h:1:0", "h:1:1", "h:1:queued"]
    # g0 acked (served now): g3, never served, comes before g0's next message
    rest = await atransport.settle_and_claim(
        [Settlement.ack(first.leases[0])], 2, holder=("x:2:5", "x:2:6")
    )
    assert rest.settled == [True]
    assert _groups_of(rest) == ["g3", "g0"]
    assert (await _info(atransport, "g3")).lease_holder == "x:2:5"
    assert (await _info(atransport, "g0")).lease_holder == "x:2:6"


async def test_a_list_of_holders_labels_lease_i_with_label_i(atransport: AsyncTransport) -> None:
    """Whatever order the groups come in (over shards too), lease i carries label i."""
    await atransport.publish_many([(f"g{g}", _ev(f"g{g}-0")) for g in range(6)])
    labels = [f"h:1:{i}" for i in range(5)]
    first = await atransport.settle_and_claim([], 5, holder=labels)
    assert len(first.leases) == 5
    assert len({lease.group_id for lease in first.leases}) == 5
    holders = [(await _info(atransport, lease.group_id)).lease_holder for lease in first.leases]
    assert holders == labels
    rest = await atransport.settle_and_claim(
        [Settlement.ack(lease) for lease in first.leases], 3, holder=("x:1", "x:2", "x:3")
    )
    assert rest.settled == [True] * 5
    assert len(rest.leases) == 1  # one group is left
    assert (await _info(atransport, rest.leases[0].group_id)).lease_holder == "x:1"


async def test_the_claim_follows_round_robin_like_claim_many(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    """Served longest ago first; never-served groups before all, ties by group id."""
    harness.require("global_fairness")
    twin = await harness.make()
    for queue in (atransport, twin):
        for group_id in ("d", "c", "b", "a"):
            await queue.publish(group_id, _ev(f"{group_id}1"))
            await queue.publish(group_id, _ev(f"{group_id}2"))
        leases = {lease.group_id: lease for lease in await queue.claim_many(4)}
        # Served in the order c, a, d; b stays leased.
        for group_id in ("c", "a", "d"):
            await harness.advance(0.05 * harness.unit)
            assert await queue.ack(leases[group_id])
        await queue.publish("e", _ev("e1"))  # never served: first in line
    fused = await atransport.settle_and_claim([], 10)
    plain = await twin.claim_many(10)
    assert _groups_of(fused) == [lease.group_id for lease in plain] == ["e", "c", "a", "d"]
    assert [_n(lease) for lease in fused.leases] == ["e1", "c2", "a2", "d2"]


async def test_a_settled_group_is_claimed_again_after_the_others(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    """The claim runs after the settlements: an acked group's next message is claimable in
    the same call, behind groups served earlier (it was served just now)."""
    harness.require("global_fairness")
    await atransport.publish("a", _ev("a1"))
    await atransport.publish("a", _ev("a2"))
    await atransport.publish("b", _ev("b1"))
    await atransport.publish("c", _ev("c1"))
    head = await _claim(atransport)
    assert head.group_id == "a"
    result = await atransport.settle_and_claim([Settlement.ack(head)], 3)
    assert result.settled == [True]
    assert [_n(lease) for lease in result.leases] == ["b1", "c1", "a2"]
    assert await atransport.ack_many(result.leases) == [True] * 3
    # With n=1 the group just settled waits its turn behind a group never served.
    await atransport.publish("x", _ev("x1"))
    await atransport.publish("x", _ev("x2"))
    await atransport.publish("y", _ev("y1"))
    head = await _claim(atransport)
    assert head.group_id == "x"
    result = await atransport.settle_and_claim([Settlement.ack(head)], 1)
    assert [_n(lease) for lease in result.leases] == ["y1"]
    # Alone in the queue, it is claimed at once.
    result = await atransport.settle_and_claim([Settlement.ack(result.leases[0])], 1)
    assert result.settled == [True]
    assert [_n(lease) for lease in result.leases] == ["x2"]


async def test_n_zero_settles_only(atransport: AsyncTransport) -> None:
    await atransport.publish("a", _ev(1))
    await atransport.publish("a", _ev(2))
    await atransport.publish("b", _ev(3))
    lease = await _claim(atransport)
    result = await atransport.settle_and_claim([Settlement.ack(lease)], 0)
    assert (result.settled, result.leases) == ([True], [])
    stats = await atransport.stats()
    assert (stats.messages, stats.in_flight) == (2, 0)
    assert (await atransport.settle_and_claim([], 0)) == SettleResult([], [])
    assert (await atransport.stats()).in_flight == 0
    assert sorted(n for _g, n in await _drain(atransport)) == [2, 3]


async def test_no_settlements_claims_only(atransport: AsyncTransport) -> None:
    assert await atransport.settle_and_claim([], 5) == SettleResult([], [])
    await atransport.publish("a", _ev(1))
    await atransport.publish("b", _ev(2))
    result = await atransport.settle_and_claim((), 5)  # any sequence, a tuple too
    assert result.settled == []
    assert sorted(_groups_of(result)) == ["a", "b"]
    assert await atransport.ack_many(result.leases) == [True, True]


async def test_the_claim_honours_visibility_min_priority_and_holder(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("priorities")
    await atransport.publish("low", _ev(1), priority=0)
    await atransport.publish("high", _ev(2), priority=3)
    await atransport.publish("top", _ev(3), priority=4)
    start = harness.now()
    result = await atransport.settle_and_claim(
        [], 5, 7 * harness.unit, min_priority=3, holder="host:1:0"
    )
    assert sorted((lease.group_id, lease.priority) for lease in result.leases) == [
        ("high", 3),
        ("top", 4),
    ]
    for lease in result.leases:
        if harness.fake_time:
            assert lease.expires_at == pytest.approx(start + 7 * harness.unit, abs=1e-3)
        info = await _info(atransport, lease.group_id)
        assert (info.state, info.lease_holder) == ("leased", "host:1:0")
    assert (await _info(atransport, "low")).state == "ready"
    # The next call settles the high leases and takes the low group, with no holder label.
    result = await atransport.settle_and_claim([Settlement.ack(x) for x in result.leases], 5)
    assert result.settled == [True, True]
    [low] = result.leases
    assert low.group_id == "low"
    assert (await _info(atransport, "low")).lease_holder is None


async def test_exhausted_heads_are_dead_lettered_at_the_claim(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1)
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    lease = await _claim(q)
    result = await q.settle_and_claim([Settlement.nack(lease, error="failed")], 1)
    assert result.settled == [True]
    [nxt] = result.leases  # the exhausted head went to the dead letters, the next came
    assert (_n(nxt), nxt.attempt) == (2, 1)
    [dead] = await q.dead_letters()
    assert (dead.message_id, dead.reason, dead.attempts) == (
        lease.message_id,
        exhausted_reason(1),
        1,
    )
    assert dead.error is not None
    assert dead.error.message == "failed"
    # n=0 claims nothing, so it exhausts nothing either.
    assert (await q.settle_and_claim([Settlement.nack(nxt)], 0)).settled == [True]
    assert len(await q.dead_letters()) == 1
    assert (await _info(q, "g")).head_attempts == 1


async def test_exhausted_heads_block_their_group_at_the_claim(harness: AsyncHarness) -> None:
    await harness.open()
    harness.require("dead_letters")
    q = await harness.make(max_attempts=1, on_exhausted="block")
    await q.publish("g", _ev(1))
    await q.publish("g", _ev(2))
    await q.publish("h", _ev(3))
    lease = await _claim(q)
    assert lease.group_id == "g"
    result = await q.settle_and_claim([Settlement.nack(lease)], 5)
    assert result.settled == [True]
    assert _groups_of(result) == ["h"]  # g is blocked on the way, h is leased
    info = await _info(q, "g")
    assert (info.state, info.depth, info.head_attempts) == ("blocked", 2, 1)
    assert await q.dead_letters() == []
    assert await q.unblock("g")
    assert _n(await _claim(q)) == 1


# -- one part never undoes the other -------------------------------------------------------


async def test_a_call_whose_settlements_all_fail_still_claims(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("a", _ev(1))
    await atransport.publish("b", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.ack(lease)
    forged = lease.model_copy(update={"token": lease.token + "x"})
    result = await atransport.settle_and_claim(
        [Settlement.ack(lease), Settlement.nack(forged, delay=harness.unit)], 3
    )
    assert result.settled == [False, False]
    [got] = result.leases
    assert (got.group_id, _n(got), got.attempt) == ("b", 2, 1)
    assert (await atransport.stats()).in_flight == 1


async def test_a_call_on_an_empty_queue_still_settles(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("a", _ev(1))
    await atransport.publish("b", _ev(2))
    await atransport.publish("c", _ev(3))
    leases = {lease.group_id: lease for lease in await atransport.claim_many(3)}
    settle = [Settlement.ack(leases["a"]), Settlement.nack(leases["b"], delay=5 * harness.unit)]
    if harness.capabilities.dead_letters:
        settle.append(Settlement.dead_letter(leases["c"], "bad"))
    else:
        settle.append(Settlement.ack(leases["c"]))
    result = await atransport.settle_and_claim(settle, 10)
    assert result.settled == [True, True, True]
    assert result.leases == []  # b is parked, a and c are gone
    stats = await atransport.stats()
    assert (stats.groups, stats.messages, stats.in_flight, stats.parked) == (1, 1, 0, 1)
    assert (await _info(atransport, "b")).state == "parked"


# -- refused input -------------------------------------------------------------------------

_BAD_SECONDS: list[Any] = [-1, -0.001, math.nan, math.inf, "1", None, True, 366 * 86400 + 1]
_BAD_COUNTS: list[Any] = [-1, 10_001, 1.5, "2", None, True]
_BAD_PRIORITIES: list[Any] = [-1, 5, 1.5, "1", True, None]
#: Bad holders of a call asking for one lease: a list must hold exactly one good holder.
_BAD_HOLDERS: list[Any] = [5, b"host", "h" * 201, "a\x00b", "g\ud800", ["h", "i"], [], [5]]
_BAD_REASONS: list[Any] = [None, 5, "a\x00b", "r" * 2001, "r\ud800"]
_BAD_ERRORS: list[Any] = [5, b"bytes", object(), ["error"], {"type": "x"}]

#: One refused call: (why, settlements, n, keyword arguments).
_Refused = tuple[str, Any, Any, dict[str, Any]]


def _refused_calls(lease: Lease, foreign: Lease) -> list[_Refused]:
    """Every call below must raise InvalidInput; *lease* is held, *foreign* another queue's."""
    ok = Settlement.ack(lease)
    calls: list[_Refused] = []
    not_lists: list[Any] = ["ack", b"ack", None, 5, ok, {"lease": lease}]
    for value in not_lists:
        calls.append((f"settlements {type(value).__name__}", value, 1, {}))
    not_settlements: list[Any] = [lease, None, "ack", ("ack", lease), lease.model_dump()]
    for value in not_settlements:
        calls.append((f"an item {type(value).__name__}", [ok, value], 1, {}))
    strangers = [
        ("another queue's lease", foreign),
        ("another store's lease", lease.model_copy(update={"origin": lease.origin + "-x"})),
        ("another queue name", lease.model_copy(update={"queue": lease.queue + "x"})),
    ]
    for why, bad in strangers:
        calls.append((f"ack of {why}", [ok, Settlement.ack(bad)], 1, {}))
        calls.append((f"nack of {why}", [Settlement.nack(bad)], 0, {}))
        calls.append((f"release of {why}", [Settlement.release(bad)], 1, {}))
        calls.append((f"dead_letter of {why}", [Settlement.dead_letter(bad, "r")], 1, {}))
    calls += [
        ("a delay on an ack", [Settlement(lease, "ack", delay=5.0)], 1, {}),
        ("a delay on a release", [Settlement(lease, "release", delay=1.0)], 1, {}),
        (
            "a delay on a dead_letter",
            [Settlement(lease, "dead_letter", delay=1.0, reason="r")],
            1,
            {},
        ),
        ("a reason on a nack", [Settlement(lease, "nack", reason="why")], 1, {}),
        ("a reason on an ack", [Settlement(lease, "ack", reason="why")], 1, {}),
        ("a reason on a release", [Settlement(lease, "release", reason="why")], 1, {}),
        ("an error on an ack", [Settlement(lease, "ack", error="e")], 1, {}),
        ("an error on a release", [Settlement(lease, "release", error="e")], 1, {}),
        ("more than 10,000 settlements", [ok] * 10_001, 1, {}),
    ]
    outcomes: list[Any] = ["finish", "ACK", "", None, 1]
    for value in outcomes:
        calls.append((f"outcome {value!r}", [ok, Settlement(lease, value)], 1, {}))
    for value in _BAD_SECONDS:
        calls.append((f"nack delay {value!r}", [Settlement.nack(lease, delay=value)], 1, {}))
        calls.append((f"visibility {value!r}", [ok], 1, {"visibility": value}))
    for value in _BAD_REASONS:
        calls.append((f"reason {value!r}", [Settlement.dead_letter(lease, value)], 1, {}))
    for value in _BAD_ERRORS:
        name = type(value).__name__
        calls.append((f"nack error {name}", [Settlement.nack(lease, error=value)], 1, {}))
        calls.append(
            (f"dead_letter error {name}", [Settlement.dead_letter(lease, "r", error=value)], 1, {})
        )
    for value in _BAD_COUNTS:
        calls.append((f"n {value!r}", [ok], value, {}))
    for value in _BAD_PRIORITIES:
        calls.append((f"min_priority {value!r}", [ok], 1, {"min_priority": value}))
    for value in _BAD_HOLDERS:
        calls.append((f"holder {value!r}", [ok], 1, {"holder": value}))
    return calls


async def test_bad_input_is_refused_and_changes_nothing(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await atransport.publish("keep-a", _ev(1))
    await atransport.publish("keep-a", _ev(2))
    await atransport.publish("keep-b", _ev(3))
    lease = await _claim(atransport)
    assert lease.group_id == "keep-a"
    other = await harness.make()
    await other.publish("keep-a", _ev(1))
    foreign = await _claim(other)
    before = await _snapshot(atransport)
    groups_before = await atransport.groups()
    calls = _refused_calls(lease, foreign)
    for why, settlements, n, kwargs in calls:
        try:
            await atransport.settle_and_claim(settlements, n, **kwargs)
        except InvalidInput:
            continue
        raise AssertionError(f"{why}: accepted instead of raising InvalidInput")
    # Nothing moved: the good settlement beside a bad one was not applied, nothing was claimed.
    assert await _snapshot(atransport) == before
    assert await atransport.groups() == groups_before
    assert await atransport.ack(lease)
    assert sorted(await _drain(atransport)) == [("keep-a", 2), ("keep-b", 3)]
    assert await other.ack(foreign)


async def test_the_limits_are_inclusive(atransport: AsyncTransport) -> None:
    await atransport.publish("g", _ev(1))
    await atransport.publish("h", _ev(2))
    lease = await _claim(atransport)
    result = await atransport.settle_and_claim([Settlement.ack(lease)] * 10_000, 0)
    assert result.settled == [True] + [False] * 9_999
    assert result.leases == []
    result = await atransport.settle_and_claim([], 10_000, 366 * 86400)
    assert _groups_of(result) == ["h"]


# -- the fused call agrees with the single calls ------------------------------------------


async def _same_by_single_calls(
    queue: AsyncTransport,
    settlements: list[Settlement],
    n: int,
    visibility: float,
    holder: str | None,
) -> SettleResult:
    """Do what ``settle_and_claim`` promises with the single calls: settle, then claim_many."""
    settled: list[bool] = []
    for item in settlements:
        if item.outcome == "ack":
            settled.append(await queue.ack(item.lease))
        elif item.outcome == "nack":
            settled.append(await queue.nack(item.lease, delay=item.delay, error=item.error))
        elif item.outcome == "release":
            settled.append(await queue.release(item.lease))
        else:
            settled.append(await queue.dead_letter(item.lease, item.reason, error=item.error))
    leases = await queue.claim_many(n, visibility, holder=holder) if n else []
    return SettleResult(settled, leases)


def _settlement(lease: Lease, kind: str, unit: float) -> Settlement:
    if kind == "ack":
        return Settlement.ack(lease)
    if kind == "nack":
        return Settlement.nack(lease)
    if kind == "nack-delay":
        return Settlement.nack(lease, delay=unit, error="retry later")
    if kind == "release":
        return Settlement.release(lease)
    return Settlement.dead_letter(lease, "rejected", error="bad input")


@pytest.mark.parametrize(("seed", "on_exhausted"), [(1, "dead_letter"), (2, "block"), (3, None)])
async def test_the_fused_call_agrees_with_the_single_calls(
    harness: AsyncHarness, seed: int, on_exhausted: str | None
) -> None:
    """Two queues of the same kind, one driven by settle_and_claim, the other by the single
    calls then claim_many, on one clock: every result and every observable state agrees."""
    await harness.open()
    for flag in ("injected_clock", "dead_letters"):
        harness.require(flag)
    options: dict[str, Any] = (
        {"max_attempts": None} if on_exhausted is None else {"max_attempts": 2}
    )
    if on_exhausted is not None:
        options["on_exhausted"] = on_exhausted
    fused = await harness.make(**options)
    single = await harness.make(**options)
    rng = random.Random(seed)
    u = harness.unit
    groups = ["a", "b", "c", "d", "e"]
    kinds = ["ack", "ack", "nack", "nack-delay", "release", "dead_letter"]
    pairs: list[tuple[Lease, Lease]] = []  # (fused's, single's), the newest last
    step = 0
    for round_ in range(40):
        for _ in range(rng.randint(0, 3)):
            step += 1
            group_id = rng.choice(groups)
            event = _ev(f"{group_id}-{step}")
            await fused.publish(group_id, event)
            await single.publish(group_id, event)
        # Mostly recent leases (most still held), sometimes old ones (fenced), repeats too.
        recent = min(len(pairs), 8)
        count = rng.randint(0, 4) if recent else 0
        chosen = [pairs[-1 - rng.randrange(recent)] for _ in range(count)]
        kinds_now = [rng.choice(kinds) for _ in chosen]
        n = rng.randint(0, 4)
        visibility = rng.choice([u, 3 * u])
        holder = rng.choice([None, "host:1:0"])
        got = await fused.settle_and_claim(
            [_settlement(f, k, u) for (f, _s), k in zip(chosen, kinds_now, strict=True)],
            n,
            visibility,
            holder=holder,
        )
        want = await _same_by_single_calls(
            single,
            [_settlement(s, k, u) for (_f, s), k in zip(chosen, kinds_now, strict=True)],
            n,
            visibility,
            holder,
        )
        where = f"round {round_} ({kinds_now}, n={n})"
        assert got.settled == want.settled, where
        assert [lease_view(x) for x in got.leases] == [lease_view(x) for x in want.leases], where
        pairs.extend(zip(got.leases, want.leases, strict=True))
        assert stats_view(await fused.stats()) == stats_view(await single.stats()), where
        assert [group_view(g) for g in await fused.groups(limit=1000)] == [
            group_view(g) for g in await single.groups(limit=1000)
        ], where
        # Each group's dead letters in id order; across groups the order of ids is the
        # store's (over shards: whose id sequences two queues of one server share).
        assert _by_group([dead_view(d) for d in await fused.dead_letters(1000)]) == _by_group(
            [dead_view(d) for d in await single.dead_letters(1000)]
        ), where
        if rng.random() < 0.2:  # an operator frees a blocked group now and then
            group_id = rng.choice(groups)
            assert await fused.unblock(group_id) == await single.unblock(group_id), where
        await harness.advance(rng.choice([0.0, 0.5 * u, u, 2 * u]))
    assert len(pairs) > 20  # the rounds claimed and settled a good deal


def _by_group(views: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Return dead-letter views grouped by group id, each group's kept in order (stable)."""
    return sorted(views, key=lambda view: str(view[0]))


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
