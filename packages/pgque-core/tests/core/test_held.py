"""HeldLeases: the leases a caller's transaction holds or settled (settle_in's bookkeeping)."""

from __future__ import annotations

import time

from pgque.core.held import HeldLeases
from pgque.core.models import Event, Lease
from pgque.core.validation import CheckedSettlement


def _ack(token: str) -> CheckedSettlement:
    lease = Lease(
        queue="q", group_id=f"g-{token}", message_id=1, token=token, priority=0,
        expires_at=time.time() + 30, attempt=1, event=Event(kind="k"),
    )  # fmt: skip
    return CheckedSettlement(lease, "ack", 0.0, "", None)


def test_a_committed_lease_is_answered_once_and_the_rest_keep_their_order() -> None:
    held = HeldLeases()
    held.open("b")
    assert held.is_open("b")
    held.close("b", committed=True)
    assert not held.is_open("b")
    items = [_ack("a"), _ack("b"), _ack("c")]
    rest, done = held.answer(items)
    assert [i.lease.token for i in rest] == ["a", "c"]
    assert done == [1]
    assert HeldLeases.merge([False, True], done, 3) == [False, True, True]
    assert held.answer(items) == (items, [])  # answered once, then forgotten


def test_a_rolled_back_lease_is_not_answered_and_old_ones_are_forgotten() -> None:
    held = HeldLeases(limit=2)
    held.open("x")
    held.close("x", committed=False)
    assert held.answer([_ack("x")])[1] == []
    for token in ("1", "2", "3"):
        held.close(token, committed=True)
    assert held.answer([_ack("1"), _ack("2"), _ack("3")])[1] == [1, 2]
