"""Bulk actions: pause, resume and retry-now over a selection of groups or a filter, redrive
and delete over dead letters; each call bounded, its filter read when it runs, its result
counting what matched and what changed (:mod:`pgque.core.bulk`)."""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from typing import Any

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import _claim, _ev, _info
from pgque.core import MAX_BULK, AsyncTransport, InvalidInput

# -- helpers -------------------------------------------------------------------------------


async def _park(transport: AsyncTransport, harness: AsyncHarness, *group_ids: str) -> None:
    """Publish one message to each group and nack it with a long delay: each group parked."""
    await transport.publish_many([(g, _ev(g)) for g in group_ids])
    for _ in group_ids:
        lease = await _claim(transport)
        assert await transport.nack(lease, delay=1000 * harness.unit, error="supplier down")


async def _dead(transport: AsyncTransport, *items: tuple[str, str]) -> list[int]:
    """Publish (group, kind) items (one per group) and dead-letter each; return the dead
    letter ids in the order of *items*."""
    await transport.publish_many([(g, _ev(g, kind=kind)) for g, kind in items])
    for _ in items:
        assert await transport.dead_letter(await _claim(transport), "bad")
    by_group = {letter.group_id: letter.id for letter in await transport.dead_letters(1000)}
    return [by_group[g] for g, _kind in items]


# -- groups --------------------------------------------------------------------------------


async def test_bulk_retry_now_of_the_parked_groups(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await _park(atransport, harness, "p3", "p1", "p2")
    await atransport.publish("ready", _ev(0))
    result = await atransport.bulk_retry_now(state="parked")
    assert (result.action, result.matched, result.changed) == ("retry_now", 3, 3)
    assert (result.ids, result.next_after, result.dry_run) == (["p1", "p2", "p3"], None, False)
    for group_id in ("p1", "p2", "p3"):
        info = await _info(atransport, group_id)
        assert (info.state, info.head_attempts) == ("ready", 1)
    leases = await atransport.claim_many(10)
    assert sorted(lease.group_id for lease in leases) == ["p1", "p2", "p3", "ready"]
    # Nothing is parked any more: the same call now matches nothing.
    again = await atransport.bulk_retry_now(state="parked")
    assert (again.matched, again.changed, again.ids) == (0, 0, [])


async def test_bulk_pause_by_prefix_is_bounded_and_goes_on_after(
    atransport: AsyncTransport,
) -> None:
    await atransport.publish_many([(f"t:{i}", _ev(i)) for i in range(5)] + [("u:0", _ev(0))])
    first = await atransport.bulk_pause(prefix="t:", limit=2)
    assert (first.matched, first.changed, first.ids) == (2, 2, ["t:0", "t:1"])
    assert first.next_after == "t:1"
    rest = await atransport.bulk_pause(prefix="t:", limit=2, after=first.next_after)
    assert rest.ids == ["t:2", "t:3"]
    last = await atransport.bulk_pause(prefix="t:", limit=2, after=rest.next_after)
    assert (last.ids, last.next_after) == (["t:4"], None)
    assert (await atransport.stats()).paused == 5
    assert [lease.group_id for lease in await atransport.claim_many(10)] == ["u:0"]
    # Pausing again changes nothing; every one matched.
    again = await atransport.bulk_pause(prefix="t:")
    assert (again.matched, again.changed) == (5, 0)
    resumed = await atransport.bulk_resume(state="paused")
    assert (resumed.matched, resumed.changed) == (5, 5)
    assert (await atransport.stats()).paused == 0


async def test_bulk_prefix_empty_selects_every_group(atransport: AsyncTransport) -> None:
    await atransport.publish_many([("a", _ev(1)), ("b", _ev(2))])
    result = await atransport.bulk_pause(prefix="")
    assert (result.matched, result.changed, result.ids) == (2, 2, ["a", "b"])


async def test_bulk_by_ids_acts_only_on_those_that_pass_the_filter(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await _park(atransport, harness, "a", "b")
    await atransport.publish("c", _ev(0))
    # "c" is not parked, "nobody" does not exist: both are left alone, "nobody" not created.
    result = await atransport.bulk_retry_now(
        group_ids=["nobody", "c", "b", "a", "a"], state="parked"
    )
    assert (result.matched, result.changed, result.ids) == (2, 2, ["a", "b"])
    assert await atransport.group("nobody") is None
    paused = await atransport.bulk_pause(group_ids=["c", "nobody"])
    assert (paused.matched, paused.changed, paused.ids) == (1, 1, ["c"])
    assert await atransport.group("nobody") is None


async def test_bulk_dry_run_selects_without_changing(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await _park(atransport, harness, "a", "b")
    preview = await atransport.bulk_retry_now(state="parked", dry_run=True)
    assert (preview.matched, preview.changed, preview.ids) == (2, 0, ["a", "b"])
    assert preview.dry_run is True
    assert (await _info(atransport, "a")).state == "parked"
    assert await atransport.claim() is None
    pause_preview = await atransport.bulk_pause(prefix="", dry_run=True)
    assert (pause_preview.matched, pause_preview.changed) == (2, 0)
    assert (await atransport.stats()).paused == 0


async def test_bulk_changed_counts_only_what_the_command_changed(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    await _park(atransport, harness, "a", "b")
    await atransport.publish("c", _ev(0))
    assert await atransport.retry_now("a")
    # Every group matches the prefix; only "b" still waits out a delay.
    result = await atransport.bulk_retry_now(prefix="")
    assert (result.matched, result.changed) == (3, 1)
    assert await atransport.pause("a")
    resumed = await atransport.bulk_resume(group_ids=["a", "b", "c"])
    assert (resumed.matched, resumed.changed) == (3, 1)


async def test_bulk_by_fairness_key(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    harness.require("fairness")
    await atransport.publish_many([("a1", _ev(1)), ("a2", _ev(2))], fairness_key="acme")
    await atransport.publish_many([("b1", _ev(3))], fairness_key="bolt")
    await atransport.publish("none", _ev(4))
    acme = await atransport.bulk_pause(key="acme")
    assert (acme.matched, acme.changed, acme.ids) == (2, 2, ["a1", "a2"])
    default = await atransport.bulk_pause(key="")
    assert default.ids == ["none"]
    both = await atransport.bulk_resume(key="acme", prefix="a2")
    assert both.ids == ["a2"]
    assert sorted(lease.group_id for lease in await atransport.claim_many(10)) == ["a2", "b1"]
    assert (await _info(atransport, "a1")).state == "paused"


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"limit": 0},
        {"prefix": "", "limit": MAX_BULK + 1},
        {"prefix": "", "limit": True},
        {"group_ids": []},
        {"group_ids": "abc"},
        {"group_ids": [""]},
        {"group_ids": [f"g{i}" for i in range(3)], "limit": 2},
        {"state": "sleeping"},
        {"prefix": 7},
        {"key": "  "},
        {"prefix": "", "after": 3},
        {"prefix": "", "dry_run": "yes"},
    ],
)
async def test_bulk_on_groups_refuses_bad_input(
    atransport: AsyncTransport, kwargs: dict[str, Any]
) -> None:
    await atransport.publish("g", _ev(1))
    for action in (atransport.bulk_pause, atransport.bulk_resume, atransport.bulk_retry_now):
        with pytest.raises(InvalidInput):
            await action(**kwargs)
    assert (await _info(atransport, "g")).state == "ready"


# -- dead letters --------------------------------------------------------------------------


async def test_bulk_redrive_by_prefix(atransport: AsyncTransport, harness: AsyncHarness) -> None:
    harness.require("dead_letters")
    ids = await _dead(atransport, ("t:1", "a"), ("u:1", "a"), ("t:2", "b"))
    result = await atransport.bulk_redrive(prefix="t:")
    assert (result.action, result.matched, result.changed) == ("redrive", 2, 2)
    assert (result.ids, result.next_after) == (sorted([ids[0], ids[2]]), None)
    assert [d.group_id for d in await atransport.dead_letters()] == ["u:1"]
    assert sorted(lease.group_id for lease in await atransport.claim_many(10)) == ["t:1", "t:2"]


async def test_bulk_delete_dead_letters_by_kind_bounded(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    ids = await _dead(atransport, ("a", "x"), ("b", "y"), ("c", "x"), ("d", "x"))
    xs = sorted([ids[0], ids[2], ids[3]])
    first = await atransport.bulk_delete_dead_letters(kind="x", limit=2)
    assert (first.action, first.matched, first.changed) == ("delete", 2, 2)
    assert (first.ids, first.next_after) == (xs[:2], xs[1])
    rest = await atransport.bulk_delete_dead_letters(kind="x", after=first.next_after)
    assert (rest.ids, rest.changed, rest.next_after) == (xs[2:], 1, None)
    assert [d.group_id for d in await atransport.dead_letters()] == ["b"]


async def test_bulk_dead_letters_by_ids_with_a_filter_and_dry_run(
    atransport: AsyncTransport, harness: AsyncHarness
) -> None:
    harness.require("dead_letters")
    ids = await _dead(atransport, ("a", "x"), ("b", "y"), ("c", "x"))
    missing = max(ids) + 1000
    preview = await atransport.bulk_redrive(
        ids=[ids[2], ids[0], missing, ids[1]], kind="x", dry_run=True
    )
    assert (preview.matched, preview.changed, preview.ids) == (2, 0, sorted([ids[0], ids[2]]))
    assert len(await atransport.dead_letters()) == 3
    deleted = await atransport.bulk_delete_dead_letters(ids=[ids[1], missing])
    assert (deleted.matched, deleted.changed, deleted.ids) == (1, 1, [ids[1]])
    redriven = await atransport.bulk_redrive(ids=ids, retry_now=True)
    assert (redriven.matched, redriven.changed) == (2, 2)
    assert await atransport.dead_letters() == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"ids": []},
        {"ids": ["1"]},
        {"ids": [True]},
        {"ids": [1, 2, 3], "limit": 2},
        {"prefix": "", "limit": 0},
        {"prefix": "", "limit": MAX_BULK + 1},
        {"kind": ""},
        {"prefix": "", "after": "x"},
        {"prefix": "", "dry_run": 1},
    ],
)
async def test_bulk_on_dead_letters_refuses_bad_input(
    atransport: AsyncTransport, harness: AsyncHarness, kwargs: dict[str, Any]
) -> None:
    harness.require("dead_letters")
    await _dead(atransport, ("a", "x"))
    for action in (atransport.bulk_redrive, atransport.bulk_delete_dead_letters):
        with pytest.raises(InvalidInput):
            await action(**kwargs)
    assert len(await atransport.dead_letters()) == 1
