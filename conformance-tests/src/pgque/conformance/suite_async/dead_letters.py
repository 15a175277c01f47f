"""Dead letters: moving a head, listing and redrive."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from typing import Any

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import (
    _claim,
    _drain,
    _ev,
    _n,
)
from pgque.core import AsyncTransport, DeadLetter

# -- dead letters --------------------------------------------------------------------------


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
    assert [d.id for d in listed] == sorted(d.id for d in listed)
    if harness.capabilities.global_id_order and harness.capabilities.global_fairness:
        assert [d.reason for d in listed] == [f"r{i}" for i in range(5)]
        assert [d.reason for d in await atransport.dead_letters(2)] == ["r0", "r1"]
    else:  # claimed in another order, or ids not in claim order across groups
        assert sorted(d.reason for d in listed) == [f"r{i}" for i in range(5)]
        assert await atransport.dead_letters(2) == listed[:2]
    assert (await atransport.stats()).dead_letters == 5
    assert (await atransport.stats()).messages == 0


async def test_redrive_all_republishes_at_tail(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    await atransport.publish("g", _ev(1), priority=3)
    await atransport.publish("g", _ev(2))
    lease = await _claim(atransport)
    assert await atransport.dead_letter(lease, "retry later")
    assert await atransport.redrive(in_place=False) == 1
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
    if harness.capabilities.global_id_order and harness.capabilities.global_fairness:
        assert sorted(n for _g, n in await _drain(atransport)) == [0, 2]
    else:  # the dead letters' id order need not be their claim order
        redriven = sorted(_n_of(d) for d in (dead[0], dead[2]))
        assert sorted(n for _g, n in await _drain(atransport)) == redriven
    assert await atransport.redrive([]) == 0
    assert await atransport.redrive([unknown]) == 0
    assert await atransport.redrive(None) == 1
    assert await atransport.dead_letters() == []


def _n_of(letter: DeadLetter) -> Any:
    assert isinstance(letter.event.data, dict)
    return letter.event.data["n"]


__all__ = [name for name in dict(globals()) if name.startswith("test_")]
