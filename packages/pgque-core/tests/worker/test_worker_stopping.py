"""When a worker run stops, without I/O: the signals a stop request sets, and when a run with
``stop_when_idle`` has found nothing left to deliver (both twins of the worker loop share
them)."""

from __future__ import annotations

import pytest

from pgque.core import QueueStats
from pgque.core.worker._stopping import Idle, IdleStop, StopSignals, drained, stop_signals


@pytest.mark.parametrize(
    ("graceful", "aborted", "expected"),
    [
        (True, False, StopSignals(stopping=True, abort=False, abandon=False)),
        (True, True, StopSignals(stopping=True, abort=False, abandon=False)),
        (False, False, StopSignals(stopping=True, abort=True, abandon=False)),
        (False, True, StopSignals(stopping=True, abort=True, abandon=True)),  # asked again
    ],
)
def test_a_stop_request_sets_the_signals_its_kind_and_the_run_call_for(
    graceful: bool, aborted: bool, expected: StopSignals
) -> None:
    assert stop_signals(graceful, aborted) == expected


def _stats(**counts: int) -> QueueStats:
    fields = {"groups": 1, "messages": 1, "in_flight": 0, "parked": 0, "blocked": 0}
    return QueueStats(**{**fields, **counts}, dead_letters=0, oldest_age_s=None)


def test_a_queue_is_drained_when_nothing_can_come_back_without_an_operator() -> None:
    assert drained(_stats())
    assert drained(_stats(blocked=3, paused=2))  # blocked and paused groups wait for people
    assert not drained(_stats(parked=1))  # a retry waiting for its delay
    assert not drained(_stats(in_flight=1))  # a lease elsewhere may end in a nack


def test_drained_stats_stop_the_run_only_once_a_second_empty_claim_confirms_them() -> None:
    idle = IdleStop()
    assert idle.empty(False) is Idle.WAIT
    assert idle.empty(True) is Idle.CONFIRM
    assert idle.empty(True) is Idle.STOP
    idle = IdleStop()
    assert idle.empty(True) is Idle.CONFIRM
    idle.claimed()  # the claim brought leases: what the stats said is stale
    assert idle.empty(True) is Idle.CONFIRM
    assert idle.empty(False) is Idle.WAIT  # not drained (or busy) after all
    assert idle.empty(True) is Idle.CONFIRM
