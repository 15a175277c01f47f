"""The times of the leases a slot holds, without I/O: when they may start, when they are
renewed and end, and when a stuck handler is reported again (both twins share them)."""

from __future__ import annotations

from pgque.core import Event, Lease
from pgque.core.worker import WorkerOptions
from pgque.core.worker._running.held import Held, next_warning, start_margin

OPTIONS = WorkerOptions(visibility=10.0, name="w")
LEASES = [
    Lease(
        group_id=f"g{i}",
        message_id=i,
        event=Event(kind="k"),
        token=f"t{i}",
        priority=0,
        attempt=1,
        expires_at=0.0,
    )
    for i in (1, 2)
]


def test_a_lease_starts_only_with_a_margin_left() -> None:
    assert start_margin(30.0) == 0.5
    assert start_margin(2.0) == 0.2  # a tenth of a short visibility


def test_held_leases_are_renewed_every_half_visibility_from_when_the_call_was_sent() -> None:
    held = Held(LEASES, claimed_at=100.0, options=OPTIONS)
    assert list(held.held) == [0, 1]
    assert (held.next_renewal, held.expires_at) == (105.0, 110.0)
    held.renewal_failed(now=105.2, options=OPTIONS)
    assert (held.next_renewal, held.expires_at) == (106.2, 110.0)  # soon; the old end holds
    held.renewed(sent=106.0, options=OPTIONS)
    assert (held.renewed_at, held.next_renewal, held.expires_at) == (106.0, 111.0, 116.0)


def test_a_stuck_handler_is_reported_once_per_interval() -> None:
    assert next_warning(10.0, 5.0, now=10.1) == 15.0
    assert next_warning(10.0, 5.0, now=22.0) == 27.0  # woke late: the missed ones are skipped
