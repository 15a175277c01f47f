"""How a handler's run on a lease ends, without I/O: whether it may start, when the runner
wakes and what it then does, how a handler is stopped, what a timeout or a handler's end
leads to, and what becomes of a lost lease (both twins of the runner share them)."""

from __future__ import annotations

import logging

import pytest

from pgque.core import Event, Lease
from pgque.core.worker import Reject, Retry, RetryPolicy, StopWorker, WorkerOptions
from pgque.core.worker._outcome import Outcome
from pgque.core.worker._running.ending import (
    Due,
    Lost,
    StopBy,
    arrives_late,
    due,
    ended,
    failure_note,
    leave_running,
    next_wake,
    stop_by,
    stuck,
    take,
    timed_out_decision,
)
from pgque.core.worker._running.held import Held
from pgque.core.worker._settling.decisions import Decision, Finished

OPTIONS = WorkerOptions(visibility=10.0, name="w")
POLICY = RetryPolicy(base=2.0, factor=1.0, max_delay=2.0, jitter=0.0)


def _lease(message_id: int, attempt: int = 1) -> Lease:
    return Lease(
        group_id=f"g{message_id}",
        message_id=message_id,
        event=Event(kind="k"),
        token=f"t{message_id}",
        priority=0,
        attempt=attempt,
        expires_at=0.0,
    )


def _held() -> Held:
    return Held([_lease(1), _lease(2)], claimed_at=100.0, options=OPTIONS)


def test_a_lease_arriving_with_too_little_left_does_not_start() -> None:
    held = _held()  # expires at 110 by the local clock; the margin is 0.5 s
    assert arrives_late(held, now=109.5, visibility=10.0) is None
    assert arrives_late(held, now=109.75, visibility=10.0) == pytest.approx(0.25)
    assert arrives_late(held, now=111.0, visibility=10.0) == pytest.approx(-1.0)
    assert arrives_late(held, now=109.85, visibility=1.0) is None  # a tenth of a short one


def test_the_runner_wakes_at_the_first_of_its_times() -> None:
    assert next_wake(0.0, next_renewal=5.0, deadline=None, warn_at=None, child_poll=None) == 5.0
    assert next_wake(0.0, next_renewal=5.0, deadline=3.0, warn_at=4.0, child_poll=None) == 3.0
    assert next_wake(0.0, next_renewal=5.0, deadline=None, warn_at=4.0, child_poll=None) == 4.0
    assert next_wake(1.0, next_renewal=5.0, deadline=3.0, warn_at=None, child_poll=0.05) == 1.05


@pytest.mark.parametrize(
    ("given_up", "abandoned", "aborted", "deadline", "expected"),
    [
        (False, False, False, None, Due.NOTHING),
        (False, False, False, 11.0, Due.NOTHING),
        (False, False, False, 10.0, Due.TIME_OUT),
        (False, False, True, 10.0, Due.RELEASE),  # the grace is over: released, not timed out
        (False, True, False, None, Due.NOTHING),  # abandon matters once a handler is given up
        (True, False, True, 10.0, Due.NOTHING),  # told to stop already: waited for
        (True, True, True, None, Due.LEAVE),
    ],
)
def test_what_a_waking_runner_does_to_its_handler(
    given_up: bool, abandoned: bool, aborted: bool, deadline: float | None, expected: Due
) -> None:
    assert due(given_up, abandoned, aborted, deadline, now=10.0) is expected


def test_a_handler_is_killed_cancelled_or_kept() -> None:
    assert stop_by(in_process=True, cancellable=True) is StopBy.KILL
    assert stop_by(in_process=True, cancellable=False) is StopBy.KILL
    assert stop_by(in_process=False, cancellable=True) is StopBy.CANCEL
    assert stop_by(in_process=False, cancellable=False) is StopBy.KEEP


def test_a_timed_out_handler_comes_back_after_the_policy_delay_or_is_exhausted() -> None:
    decision, follows = timed_out_decision(5.0, _lease(1), POLICY, 3, "dead_letter")
    assert (decision.outcome, decision.delay, decision.final) == (Outcome.TIMED_OUT, 2.0, False)
    assert follows == "it comes back in 2 s"
    decision, follows = timed_out_decision(5.0, _lease(1, attempt=3), POLICY, 3, "block")
    assert (decision.outcome, decision.delay, decision.final) == (Outcome.TIMED_OUT, 0.0, True)
    assert follows.startswith("it was the last of max_attempts (3): its group will be blocked")


def test_a_handler_given_up_is_settled_as_decided_then_unless_it_returned_first() -> None:
    lease = _lease(1)
    release = Decision(Outcome.RELEASED)
    timeout = Decision(Outcome.TIMED_OUT, delay=2.0)
    assert ended(release, None, True, lease, POLICY, None).decision is release
    assert ended(timeout, None, False, lease, POLICY, None).decision is timeout
    # A thread told to stop that returned on its own is settled by what it did.
    returned = ended(release, None, False, lease, POLICY, None)
    assert (returned.decision.outcome, returned.stop, returned.failure) == (
        Outcome.ACKED,
        None,
        None,
    )


def test_a_handler_end_is_decided_by_what_it_raised() -> None:
    lease = _lease(1)
    stop = StopWorker(RuntimeError("disk full"))
    end = ended(None, stop, False, lease, POLICY, None)
    assert (end.decision.outcome, end.stop, end.failure) == (Outcome.RELEASED, stop, None)
    error = ValueError("bad")
    end = ended(None, error, False, lease, POLICY, None)
    assert (end.decision.outcome, end.decision.delay, end.failure) == (Outcome.RETRIED, 2.0, error)
    reject = Reject("no")
    end = ended(None, reject, False, lease, POLICY, None)
    assert (end.decision.outcome, end.failure) == (Outcome.DEAD_LETTERED, reject)


def test_a_stuck_handler_is_reported_with_how_long_it_ran() -> None:
    assert stuck(started=10.0, warn_at=15.0, every=5.0, now=15.5) == (5.5, 20.0)
    assert stuck(started=10.0, warn_at=15.0, every=5.0, now=27.0) == (17.0, 32.0)


def test_a_finished_lease_is_taken_out_to_be_settled() -> None:
    held = _held()
    decision = Decision(Outcome.ACKED)
    taken = take(held, 0, decision, started=101.0, now=103.0, on_exhausted="dead_letter")
    assert isinstance(taken, Finished)
    assert (taken.lease.message_id, taken.decision, taken.started, taken.expires_at) == (
        1,
        decision,
        101.0,
        110.0,
    )
    assert list(held.held) == [1]
    never_ran = take(held, 1, Decision(Outcome.RELEASED), 0.0, 104.0, "dead_letter")
    assert isinstance(never_ran, Finished)
    assert never_ran.started == 104.0
    assert held.held == {}


def test_a_lost_lease_is_counted_not_settled() -> None:
    held = _held()
    assert leave_running(held, 0).message_id == 1
    assert held.lost == {0}
    assert 0 in held.held  # left running: still held until taken
    final = Decision(Outcome.TIMED_OUT, final=True)
    taken = take(held, 0, final, started=101.0, now=103.0, on_exhausted="dead_letter")
    assert taken == Lost(taken.lease, Outcome.DEAD_LETTERED, 101.0, True)
    assert taken.lease.message_id == 1
    held.lost.add(1)
    taken = take(held, 1, Decision(Outcome.ACKED), 0.0, 104.0, "dead_letter")
    assert taken == Lost(taken.lease, Outcome.LOST, 104.0, False)


def test_a_failure_is_told_by_what_follows_for_its_message() -> None:
    lease = _lease(7, attempt=2)
    reject = Reject("bad data")
    note = failure_note(
        lease, reject, Decision(Outcome.DEAD_LETTERED, reason="bad data"), "block", 3
    )
    assert (note.level, note.text % note.args, note.traceback) == (
        logging.WARNING,
        "handler rejected message 7: bad data",
        None,
    )
    error = ValueError("boom")
    note = failure_note(lease, error, Decision(Outcome.RETRIED, delay=1.5), "dead_letter", 3)
    assert (note.level, note.text % note.args, note.traceback) == (
        logging.WARNING,
        "handler failed on message 7 (attempt 2): ValueError: boom; retry in 1.5s",
        error,
    )
    last = Decision(Outcome.RETRIED, final=True)
    note = failure_note(lease, error, last, "dead_letter", 2)
    assert note.text % note.args == (
        "handler failed on message 7 (attempt 2): ValueError: boom; "
        "it was the last of max_attempts (2): it will be dead-lettered"
    )
    assert note.traceback is error
    retry = Retry(4.0)
    note = failure_note(lease, retry, Decision(Outcome.RETRIED, delay=4.0), "dead_letter", 3)
    assert (note.level, note.text % note.args, note.traceback) == (
        logging.INFO,
        "handler asked to retry message 7 in 4s",
        None,
    )
    assert failure_note(lease, retry, last, "dead_letter", 2).traceback is None  # no traceback
