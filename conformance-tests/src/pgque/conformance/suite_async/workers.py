"""Live workers: each worker's row, its heartbeats, its slots and the leases held in its name.

Gated on ``Capabilities.workers`` (docs/workers.md). A heartbeat registers a worker or
refreshes its row on the store's clock; ``workers()`` lists the rows by id, each with what its
busy slots held at its last heartbeat and the unexpired leases whose holder label starts with
the worker's ``holder`` prefix; a worker silent for more than ``ALIVE_MULTIPLE`` intervals is
``alive=False`` and still shows those leases; a goodbye removes its row.
"""

# The source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import pytest

from pgque.conformance._harness_async import AsyncHarness
from pgque.conformance.suite_async._helpers import _claim, _ev
from pgque.core import (
    AsyncSupportsWorkers,
    AsyncTransport,
    InvalidInput,
    SlotBeat,
    WorkerBeat,
    WorkerInfo,
)
from pgque.core.live_workers import ALIVE_MULTIPLE, PRUNE_AFTER_S

# -- helpers -------------------------------------------------------------------------------


async def _kept(harness: AsyncHarness) -> AsyncTransport:
    """Open the test's transport and skip unless it keeps live workers."""
    transport = await harness.open()
    harness.require("workers")
    assert isinstance(transport, AsyncSupportsWorkers)
    return transport


def _beat(
    worker: str = "w-a",
    holder: str = "host-a:7",
    *,
    every: float = 1.0,
    concurrency: int = 2,
    slots: tuple[SlotBeat, ...] = (),
) -> WorkerBeat:
    return WorkerBeat(
        id=worker,
        holder=holder,
        host=holder.rpartition(":")[0],
        pid=int(holder.rpartition(":")[2]),
        version="1.2.3",
        concurrency=concurrency,
        heartbeat_every=every,
        slots=slots,
    )


async def _heartbeat(t: AsyncTransport, beat: WorkerBeat) -> None:
    assert isinstance(t, AsyncSupportsWorkers)
    await t.heartbeat(beat)


async def _workers(t: AsyncTransport, include_gone: bool = True) -> list[WorkerInfo]:
    assert isinstance(t, AsyncSupportsWorkers)
    return await t.workers(include_gone=include_gone)


async def _goodbye(t: AsyncTransport, worker: str) -> bool:
    assert isinstance(t, AsyncSupportsWorkers)
    return await t.goodbye(worker)


# -- registering and heartbeating -------------------------------------------------------------


async def test_workers_lists_nobody_before_a_heartbeat(harness: AsyncHarness) -> None:
    t = await _kept(harness)
    assert await _workers(t) == []


async def test_workers_a_heartbeat_registers_the_worker_with_its_identity_and_slots(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    await t.publish("order-42", _ev(1))
    lease = await _claim(t, holder="host-a:7:1")
    before = harness.now()
    slot = SlotBeat(slot=1, group_id="order-42", message_id=lease.message_id, held_for=0.25)
    await _heartbeat(t, _beat(slots=(slot,)))
    after = harness.now()
    [info] = await _workers(t)
    assert (info.id, info.holder, info.host, info.pid) == ("w-a", "host-a:7", "host-a", 7)
    assert (info.version, info.queue, info.concurrency) == ("1.2.3", t.queue, 2)
    assert (info.slots_busy, info.heartbeat_every, info.alive) == (1, 1.0, True)
    assert before - 1.0 <= info.started_at == info.last_heartbeat <= after + 1.0
    [held] = info.slots
    assert (held.slot, held.group_id, held.message_id) == (1, "order-42", lease.message_id)
    assert held.since == pytest.approx(info.last_heartbeat - 0.25, abs=1e-6)
    [owned] = info.leases
    assert (owned.group_id, owned.message_id, owned.holder) == (
        "order-42",
        lease.message_id,
        "host-a:7:1",
    )
    assert owned.expires_at == pytest.approx(lease.expires_at, abs=1e-3)


async def test_workers_a_later_heartbeat_keeps_started_at_and_replaces_the_slots(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    slot = SlotBeat(slot=0, group_id="g", message_id=1, held_for=0.0)
    await _heartbeat(t, _beat(slots=(slot,), every=harness.unit))
    [first] = await _workers(t)
    await harness.advance(harness.unit)
    await _heartbeat(t, _beat(every=harness.unit))
    [second] = await _workers(t)
    assert second.started_at == first.started_at
    assert second.last_heartbeat > first.last_heartbeat
    assert (second.slots, second.slots_busy, second.alive) == ((), 0, True)


async def test_workers_are_listed_by_id_each_with_only_its_own_leases(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    for group in ("a", "b", "c", "d"):
        await t.publish(group, _ev(1))
    await _claim(t, holder="host-a:7:0")  # a
    await _claim(t, holder="host-a:7:queued")  # b
    await _claim(t, holder="host-a:70:0")  # c: another process, whose pid starts alike
    await _claim(t, holder=None)  # d: no holder
    await _heartbeat(t, _beat("w-b", "host-a:70"))
    await _heartbeat(t, _beat("w-a", "host-a:7"))
    listed = await _workers(t)
    assert [w.id for w in listed] == ["w-a", "w-b"]
    assert [(x.group_id, x.holder) for x in listed[0].leases] == [
        ("a", "host-a:7:0"),
        ("b", "host-a:7:queued"),
    ]
    assert [(x.group_id, x.holder) for x in listed[1].leases] == [("c", "host-a:70:0")]


async def test_workers_a_settled_or_expired_lease_is_no_longer_the_workers(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    await t.publish("a", _ev(1))
    await t.publish("b", _ev(2))
    first = await _claim(t, holder="host-a:7:0")
    await _claim(t, 2 * harness.unit, holder="host-a:7:1")
    await _heartbeat(t, _beat(every=60.0))
    assert len((await _workers(t))[0].leases) == 2
    assert await t.ack(first)
    assert [x.group_id for x in (await _workers(t))[0].leases] == ["b"]
    await harness.advance(3 * harness.unit)
    assert (await _workers(t))[0].leases == ()


# -- a worker gone without a goodbye --------------------------------------------------------


async def test_workers_a_worker_whose_heartbeat_stopped_is_gone_with_its_live_leases(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    await t.publish("order-1", _ev(1))
    await t.publish("order-2", _ev(2))
    held = [await _claim(t, 600.0, holder=f"host-a:7:{slot}") for slot in (0, 1)]
    every = harness.unit
    await _heartbeat(t, _beat(every=every))
    assert [w.alive for w in await _workers(t, include_gone=False)] == [True]
    await harness.advance((ALIVE_MULTIPLE + 1) * every)
    [gone] = await _workers(t)
    assert not gone.alive
    assert sorted((x.group_id, x.message_id) for x in gone.leases) == sorted(
        (lease.group_id, lease.message_id) for lease in held
    )
    expiries = {lease.group_id: lease.expires_at for lease in held}
    for owned in gone.leases:
        assert owned.expires_at == pytest.approx(expiries[owned.group_id], abs=1e-3)
        assert owned.expires_at > harness.now()
    assert await _workers(t, include_gone=False) == []
    await _heartbeat(t, _beat(every=every))  # it comes back
    assert [w.alive for w in await _workers(t, include_gone=False)] == [True]


async def test_workers_a_goodbye_removes_the_worker(harness: AsyncHarness) -> None:
    t = await _kept(harness)
    await _heartbeat(t, _beat("w-a"))
    await _heartbeat(t, _beat("w-b", "host-b:8"))
    assert await _goodbye(t, "w-a")
    assert [w.id for w in await _workers(t)] == ["w-b"]
    assert not await _goodbye(t, "w-a")
    assert not await _goodbye(t, "never-seen")


async def test_workers_a_silent_workers_row_is_pruned_by_a_later_heartbeat(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    if not harness.fake_time:
        pytest.skip("an hour must pass: needs the injected clock")
    await _heartbeat(t, _beat("w-old", "host-a:7"))
    await harness.advance(PRUNE_AFTER_S - 1.0)
    await _heartbeat(t, _beat("w-new", "host-b:8"))
    assert [w.id for w in await _workers(t)] == ["w-new", "w-old"]
    await harness.advance(2.0)
    await _heartbeat(t, _beat("w-new", "host-b:8"))
    assert [w.id for w in await _workers(t)] == ["w-new"]


async def test_workers_are_kept_per_queue(harness: AsyncHarness) -> None:
    t = await _kept(harness)
    other = await harness.make(queue=f"{t.queue}-other")
    await _heartbeat(t, _beat("w-a"))
    assert await _workers(other) == []
    assert [w.queue for w in await _workers(t)] == [t.queue]


# -- checks ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "beat",
    [
        _beat(every=0.0),
        _beat(every=601.0),
        _beat(concurrency=0),
        _beat(slots=(SlotBeat(2, "g", 1, 0.0),)),  # slot >= concurrency
        _beat(slots=(SlotBeat(0, "g", 1, 0.0), SlotBeat(0, "h", 2, 0.0))),
        _beat(slots=(SlotBeat(0, "g", 1, -1.0),)),
        _beat(slots=(SlotBeat(0, "", 1, 0.0),)),
        _beat(slots=(SlotBeat(0, "g", 0, 0.0),)),
        _beat(worker=""),
        _beat(worker="x" * 201),
        _beat(worker="a\x00b"),
    ],
)
async def test_workers_a_bad_heartbeat_is_refused(harness: AsyncHarness, beat: WorkerBeat) -> None:
    t = await _kept(harness)
    with pytest.raises(InvalidInput):
        await _heartbeat(t, beat)
    assert await _workers(t) == []


async def test_workers_bad_arguments_of_workers_and_goodbye_are_refused(
    harness: AsyncHarness,
) -> None:
    t = await _kept(harness)
    assert isinstance(t, AsyncSupportsWorkers)
    with pytest.raises(InvalidInput):
        await t.workers(include_gone="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await t.goodbye("")
