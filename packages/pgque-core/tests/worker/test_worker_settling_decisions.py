"""What settling decides without I/O: how an answered settlement is counted, which ones wait
for the next round trip after a failed one, whether one whose reply was lost took effect, and
what a handler past its hard timeout gets (both twins of each part share these)."""

from __future__ import annotations

import pytest

from pgque.core import ConnectionLost, Event, GroupInfo, InvalidInput, Lease, RetryableConflict
from pgque.core.worker import RetryPolicy
from pgque.core.worker._outcome import Outcome
from pgque.core.worker._settling.decisions import (
    Decision,
    Finished,
    answered_outcome,
    settles_again,
    split_failed,
    split_known,
    timed_out,
    took_effect,
)

LEASE = Lease(
    group_id="g",
    message_id=7,
    event=Event(kind="k"),
    token="t",
    priority=0,
    attempt=1,
    expires_at=0.0,
)


def _finished(outcome: Outcome, *, final: bool = False, expires_at: float = 10.0) -> Finished:
    return Finished(LEASE, Decision(outcome, final=final), 0.0, expires_at)


@pytest.mark.parametrize(
    ("outcome", "final", "done", "on_exhausted", "counted"),
    [
        (Outcome.ACKED, False, True, "dead_letter", Outcome.ACKED),
        (Outcome.ACKED, False, False, "dead_letter", Outcome.LOST),
        (Outcome.TIMED_OUT, False, False, "dead_letter", Outcome.TIMED_OUT),
        (Outcome.RETRIED, True, True, "dead_letter", Outcome.DEAD_LETTERED),
        (Outcome.RETRIED, True, True, "block", Outcome.RETRIED),
        (Outcome.RETRIED, True, False, "dead_letter", Outcome.LOST),
    ],
)
def test_an_answered_settlement_is_counted_by_its_outcome_or_lost(
    outcome: Outcome, final: bool, done: bool, on_exhausted: str, counted: Outcome
) -> None:
    decision = Decision(outcome, final=final)
    assert answered_outcome(decision, done, on_exhausted) is counted  # type: ignore[arg-type]


def test_a_settlement_waits_for_the_next_round_trip_only_when_it_may() -> None:
    item = _finished(Outcome.ACKED, expires_at=10.0)
    assert settles_again(ConnectionLost("x"), False, 9.0, item)
    assert settles_again(RetryableConflict("x"), False, 9.0, item)
    assert not settles_again(ConnectionLost("x"), True, 9.0, item)  # the run aborted
    assert not settles_again(ConnectionLost("x"), False, 10.0, item)  # its lease is over
    assert not settles_again(InvalidInput("x"), False, 9.0, item)  # refused for good


def _group(head: int | None, state: str = "ready") -> GroupInfo:
    return GroupInfo(group_id="g", state=state, depth=1, priority=0, head_message_id=head)  # type: ignore[arg-type]


def test_a_lost_reply_is_judged_by_the_group_the_store_shows() -> None:
    ack = _finished(Outcome.ACKED)
    assert took_effect(ack, None)
    assert took_effect(ack, _group(8))
    assert not took_effect(ack, _group(7))
    nack = _finished(Outcome.RETRIED)
    assert took_effect(nack, _group(7))
    assert not took_effect(nack, _group(7, "leased"))  # someone holds it: the lease was lost
    assert not took_effect(nack, None)
    assert took_effect(_finished(Outcome.DEAD_LETTERED), _group(None))


def test_a_handler_past_its_hard_timeout_is_nacked_with_a_timeout_error() -> None:
    policy = RetryPolicy(base=2.0, factor=2.0, max_delay=60.0, jitter=0.0)
    decision = timed_out(1.5, LEASE, policy, max_attempts=3)
    assert (decision.outcome, decision.delay, decision.final) == (Outcome.TIMED_OUT, 2.0, False)
    assert isinstance(decision.error, TimeoutError)
    assert str(decision.error) == "handler overran hard_timeout (1.5s); stopped"
    last = timed_out(1.5, LEASE, policy, max_attempts=1)  # LEASE is on attempt 1
    assert (last.delay, last.final) == (0.0, True)


def test_a_failed_round_trip_keeps_what_may_be_retried_and_loses_the_rest() -> None:
    lasting = _finished(Outcome.ACKED, expires_at=10.0)
    ending = _finished(Outcome.RETRIED, expires_at=9.0)
    assert split_failed([lasting, ending], ConnectionLost("x"), False, 9.0) == (
        [lasting],
        [ending],
    )
    assert split_failed([lasting], ConnectionLost("x"), True, 1.0) == ([], [lasting])
    assert split_failed([lasting], InvalidInput("x"), False, 1.0) == ([], [lasting])


def test_the_settlements_whose_results_are_known_are_counted_the_rest_resent() -> None:
    first, second, third = (_finished(Outcome.ACKED) for _ in range(3))
    answered, rest = split_known([first, second, third], [True, None, False])
    assert answered == [(first, True), (third, False)]
    assert rest == [second]
    with pytest.raises(ValueError, match="shorter"):
        split_known([first], [])
