"""The claim batcher's decisions, without I/O: the buffer's size, hold and accounts, what a
round trip carries, and what becomes of one that failed (both twins share them)."""

from __future__ import annotations

import collections
from dataclasses import dataclass

import pytest

from pgque.core import ConnectionLost, Event, InvalidInput, Lease, PgqueError, RetryableConflict
from pgque.core.validation import MAX_BATCH
from pgque.core.worker import WorkerOptions
from pgque.core.worker._claiming.planning import (
    BUFFER_HOLD,
    ClaimPlan,
    LeaseBuffer,
    PartlyApplied,
    holder_runs,
    next_plan,
    plan_claims,
    sent_apart,
    serve_waiting,
    split_partly,
)
from pgque.core.worker._outcome import Outcome
from pgque.core.worker._settling.decisions import Decision, Finished, released


def _lease(message_id: int) -> Lease:
    return Lease(
        group_id=f"g{message_id}",
        message_id=message_id,
        event=Event(kind="k"),
        token=f"t{message_id}",
        priority=0,
        attempt=1,
        expires_at=0.0,
    )


@dataclass
class Want:
    holder: str
    count: int


def _options(
    concurrency: int = 2, visibility: float = 30.0, batch_size: int = 1, prefetch: int | None = None
) -> WorkerOptions:
    return WorkerOptions(
        concurrency=concurrency,
        visibility=visibility,
        batch_size=batch_size,
        prefetch=prefetch,
        name="w",
    )


def test_the_buffer_first_keeps_one_lease_a_slot_then_follows_the_rate() -> None:
    buffer = LeaseBuffer(_options(concurrency=4, batch_size=2, prefetch=64))
    assert buffer.size(now=100.0) == 8  # no rate measured yet: concurrency x batch_size
    buffer.took(8, now=100.0)
    buffer.took(8, now=101.0)
    assert buffer.size(now=101.0) == 1  # 16 leases a second: under one in BUFFER_HORIZON
    buffer.took(100, now=101.0)
    assert buffer.size(now=101.0) == 6  # 116 in the last second: ceil(5.8)
    assert LeaseBuffer(_options(prefetch=0)).size(now=0.0) == 0


def test_a_buffered_lease_waits_its_hold_then_is_released() -> None:
    buffer = LeaseBuffer(_options(visibility=4.0))
    assert buffer.hold == min(BUFFER_HOLD, 1.0)
    assert buffer.next_expiry(now=0.0) is None
    buffer.add([_lease(1), _lease(2)], sent=10.0)
    buffer.add([_lease(3)], sent=10.5)
    assert buffer.next_expiry(now=10.25) == pytest.approx(0.75)
    expired = buffer.expired(now=11.0)
    assert [f.lease.message_id for f in expired] == [1, 2]
    assert all(f.decision.outcome is Outcome.RELEASED for f in expired)
    assert expired[0].expires_at == 14.0  # its claim was sent at 10: visibility counts from then
    assert len(buffer) == 1
    leases, sent_at = buffer.pop(5, now=11.2)
    assert ([x.message_id for x in leases], sent_at) == ([3], 10.5)
    assert buffer.pop(1, now=12.0) == ([], 12.0)


def test_release_all_empties_the_buffer() -> None:
    buffer = LeaseBuffer(_options())
    buffer.add([_lease(1), _lease(2)], sent=1.0)
    assert [f.lease.message_id for f in buffer.release_all(now=2.0)] == [1, 2]
    assert len(buffer) == 0


def test_a_call_claims_for_the_waiting_slots_and_tops_up_the_buffer() -> None:
    buffer = LeaseBuffer(_options(concurrency=2, prefetch=64))
    wants = collections.deque([Want("h:0", 1), Want("h:1", 1)])
    plan = plan_claims(wants, [], buffer, "h:queued", now=0.0)
    assert not wants
    assert plan.holders == ["h:0", "h:1", "h:queued", "h:queued"]
    assert plan.buffered == 2
    # The next call counts what this one asked for the buffer until it is answered.
    assert plan_claims(collections.deque([Want("h:0", 1)]), [], buffer, "q", 0.0).buffered == 0
    buffer.answered(plan.buffered)
    assert plan_claims(collections.deque([Want("h:0", 1)]), [], buffer, "q", 0.0).buffered == 2


def test_releases_of_the_buffer_alone_claim_nothing_more() -> None:
    buffer = LeaseBuffer(_options())
    unused = released(_lease(1), 0.0, 30.0)
    nobody: collections.deque[Want] = collections.deque()
    plan = plan_claims(nobody, [unused], buffer, "q", now=0.0)
    assert (plan.holders, plan.buffered, plan.empty) == ([], 0, False)
    ran = Finished(_lease(2), Decision(Outcome.ACKED), 0.0, 30.0)
    assert plan_claims(nobody, [ran], buffer, "q", now=0.0).buffered == 2


def test_a_call_asks_for_at_most_max_batch_leases() -> None:
    buffer = LeaseBuffer(_options(prefetch=MAX_BATCH))
    wants = collections.deque([Want("a", MAX_BATCH - 1), Want("b", 2)])
    plan = plan_claims(wants, [], buffer, "q", now=0.0)
    assert [w.holder for w in plan.wants] == ["a"]
    assert list(wants) == [Want("b", 2)]  # waits for the next call
    assert len(plan.holders) == MAX_BATCH  # one left for the buffer


def test_a_plan_shares_the_leases_in_order_and_names_itself() -> None:
    plan: ClaimPlan[Want] = ClaimPlan(wants=[Want("a", 2), Want("b", 1)], buffered=2)
    plan.holders = ["a", "a", "b", "q", "q"]
    shares, rest = plan.share([_lease(i) for i in range(1, 6)])
    assert [[x.message_id for x in share] for share in shares] == [[1, 2], [3]]
    assert [x.message_id for x in rest] == [4, 5]
    assert plan.operation() == "claim"
    acked = Finished(_lease(9), Decision(Outcome.ACKED), 0.0, 1.0)
    assert plan.with_finished([acked]).operation() == "ack and claim"
    assert plan.with_finished([acked, acked]).operation() == "settle (2) and claim"
    alone = plan.claim_alone()
    assert (alone.holders, alone.buffered, alone.finished) == (["a", "a", "b"], 0, [])
    plan.check_answer(0, 5)
    with pytest.raises(PgqueError, match="6 leases for 5"):
        plan.check_answer(0, 6)


@pytest.mark.parametrize(
    ("error", "parts", "split_when_lost", "apart"),
    [
        (ConnectionLost("x"), 3, False, False),  # retried whole with the next call
        (ConnectionLost("x"), 3, True, True),  # over shards: the others go on
        (ConnectionLost("x"), 1, True, False),
        (RetryableConflict("x"), 3, True, False),
        (InvalidInput("x"), 3, False, True),  # refused for good: one bad part fails alone
        (InvalidInput("x"), 1, False, False),
    ],
)
def test_what_a_failed_call_becomes(
    error: Exception, parts: int, split_when_lost: bool, apart: bool
) -> None:
    assert sent_apart(error, parts, split_when_lost=split_when_lost) is apart


def test_a_transport_without_the_fused_call_gets_one_claim_per_run_of_holders() -> None:
    assert holder_runs(["a", "a", "b", "q", "q", "a"]) == [("a", 2), ("b", 1), ("q", 2), ("a", 1)]
    assert holder_runs([]) == []


def test_waiting_slots_are_served_from_the_buffer_first() -> None:
    buffer = LeaseBuffer(_options(visibility=4.0))  # a hold of 1 s
    buffer.add([_lease(1)], sent=9.0)
    buffer.add([_lease(2), _lease(3), _lease(4)], sent=10.0)
    wants = collections.deque([Want("a", 2), Want("b", 2), Want("c", 1)])
    served, given_back = serve_waiting(wants, buffer, now=10.5, stopping=False)
    assert [f.lease.message_id for f in given_back] == [1]  # past its hold: released
    assert [(w.holder, [x.message_id for x in xs], at) for w, xs, at in served] == [
        ("a", [2, 3], 10.0),
        ("b", [4], 10.0),
    ]
    assert list(wants) == [Want("c", 1)]  # the buffer is empty: it claims
    assert len(buffer) == 0


def test_a_stopping_run_gives_the_whole_buffer_back_and_serves_nobody() -> None:
    buffer = LeaseBuffer(_options())
    buffer.add([_lease(1), _lease(2)], sent=10.0)
    wants = collections.deque([Want("a", 1)])
    served, given_back = serve_waiting(wants, buffer, now=10.1, stopping=True)
    assert served == []
    assert [f.lease.message_id for f in given_back] == [1, 2]
    assert list(wants) == [Want("a", 1)]


def test_the_next_plan_claims_unless_the_run_stops() -> None:
    buffer = LeaseBuffer(_options(prefetch=0))
    acked = Finished(_lease(9), Decision(Outcome.ACKED), 0.0, 1.0)
    wants = collections.deque([Want("a", 1), Want("b", 1)])
    plan, turned_away = next_plan(wants, [acked], buffer, "q", 0.0, stopping=False)
    assert plan is not None
    assert (plan.holders, plan.finished, turned_away) == (["a", "b"], [acked], [])
    wants = collections.deque([Want("a", 1), Want("b", 1)])
    plan, turned_away = next_plan(wants, [acked], buffer, "q", 0.0, stopping=True)
    assert plan is not None
    assert (plan.holders, plan.finished) == ([], [acked])  # it only settles
    assert (turned_away, list(wants)) == ([Want("a", 1), Want("b", 1)], [])
    nothing = next_plan(collections.deque[Want](), [], buffer, "q", 0.0, stopping=True)
    assert nothing == (None, [])


def test_a_call_that_failed_part_of_the_way_is_split() -> None:
    finished = [Finished(_lease(i), Decision(Outcome.ACKED), 0.0, 1.0) for i in (1, 2, 3)]
    plan: ClaimPlan[Want] = ClaimPlan(finished=finished, wants=[Want("a", 1)], holders=["a"])
    assert plan.lease is not None
    assert plan.lease.message_id == 1
    part = PartlyApplied([True, False], ConnectionLost("x"), [_lease(7)])
    answered, rest, given_back = split_partly(plan, part, now=5.0, visibility=30.0)
    assert answered == [(finished[0], True), (finished[1], False)]
    assert (rest.finished, rest.wants, rest.holders) == ([finished[2]], [Want("a", 1)], ["a"])
    assert [(f.lease.message_id, f.decision.outcome) for f in given_back] == [(7, Outcome.RELEASED)]
    assert given_back[0].expires_at == 35.0
    assert ClaimPlan[Want]().lease is None
