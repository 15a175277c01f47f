"""The concurrency tests of the asyncio suite: tasks, each with its own transport.

Hand-written (not generated): tasks and threads need different synchronisation. Its blocking
counterpart is ``_concurrency_sync.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from pgque.conformance._harness_async import AsyncHarness
from pgque.core import AsyncSupportsWakeups, AsyncTransport, Event, Lease

__all__ = [
    "test_concurrent_drain_tasks",
    "test_pause_racing_claims",
    "test_redrive_racing_publishes",
    "test_one_tick_racing_from_several_workers",
    "test_a_waiter_caps_its_wait_for_a_message_scheduled_meanwhile",
    "GROUPS",
    "PER_GROUP",
    "WORKERS",
]

GROUPS = 40
PER_GROUP = 25
WORKERS = 8
#: Only reached when the transport loses a message; a correct run takes a small fraction.
DEADLINE_S = 60.0


async def test_concurrent_drain_tasks(harness: AsyncHarness) -> None:
    """8 tasks drain 40 groups x 25 messages: exactly once, FIFO per group, one holder."""
    first = await harness.open()
    await first.publish_many(
        [
            (f"g{g:02d}", Event(kind="work", data={"seq": seq}))
            for seq in range(PER_GROUP)
            for g in range(GROUPS)
        ]
    )
    workers = [await harness.make(queue=first.queue) for _ in range(WORKERS)]
    total = GROUPS * PER_GROUP
    processed: dict[str, list[int]] = {}
    holders: dict[str, int] = {}
    problems: list[str] = []
    done = 0

    async def work(index: int, transport: AsyncTransport) -> None:
        nonlocal done
        while done < total and not problems:
            lease = await transport.claim(30.0)
            if lease is None:
                await asyncio.sleep(0.001)
                continue
            group = lease.group_id
            if group in holders:
                problems.append(f"{group} held by {holders[group]} and {index}")
            holders[group] = index
            await asyncio.sleep(0)  # let every other task try to take the same group
            assert isinstance(lease.event.data, dict)
            seq = lease.event.data["seq"]
            assert isinstance(seq, int)
            processed.setdefault(group, []).append(seq)
            done += 1
            del holders[group]
            if not await transport.ack(lease):
                problems.append(f"ack of {group}#{seq} was refused")

    await asyncio.wait_for(asyncio.gather(*(work(i, t) for i, t in enumerate(workers))), DEADLINE_S)
    assert problems == []
    assert processed == {f"g{g:02d}": list(range(PER_GROUP)) for g in range(GROUPS)}
    stats = await first.stats()
    assert (stats.groups, stats.messages, stats.in_flight) == (0, 0, 0)


PAUSE_GROUPS = 12
PAUSE_PER_GROUP = 40
PAUSE_WORKERS = 6
#: Deliveries between two pauses, so each pause meets claims in flight.
PAUSE_EVERY = 8


def _seq(lease: Lease) -> int:
    data = lease.event.data
    assert isinstance(data, dict)
    seq = data["seq"]
    assert isinstance(seq, int)
    return seq


async def test_pause_racing_claims(harness: AsyncHarness) -> None:
    """Tasks claim while groups are paused one by one: once ``pause`` has returned True, no
    claim started after it leases that group; leases already out still ack."""
    first = await harness.open()
    groups = [f"p{g:02d}" for g in range(PAUSE_GROUPS)]
    await first.publish_many(
        [(g, Event(kind="work", data={"seq": s})) for s in range(PAUSE_PER_GROUP) for g in groups]
    )
    workers = [await harness.make(queue=first.queue) for _ in range(PAUSE_WORKERS)]
    ticks = [0]  # one order for claim starts and pause ends
    paused_at: dict[str, int] = {}
    leased: list[tuple[str, int, int]] = []  # group, seq, tick of the claim's start
    problems: list[str] = []
    stop = False
    progress = asyncio.Event()  # set at every claim start: the operator waits on it

    def tick() -> int:
        ticks[0] += 1
        progress.set()
        return ticks[0]

    async def until(done: Callable[[], bool]) -> None:
        while not done():
            progress.clear()
            await asyncio.wait_for(progress.wait(), DEADLINE_S)

    async def work(transport: AsyncTransport) -> None:
        while not stop and not problems:
            started = tick()
            lease = await transport.claim(30.0)
            if lease is None:
                await asyncio.sleep(0.001)
                continue
            leased.append((lease.group_id, _seq(lease), started))
            await asyncio.sleep(0)  # let the operator pause while this lease is out
            if not await transport.ack(lease):
                problems.append(f"ack of {lease.group_id}#{_seq(lease)} was refused")

    async def operator() -> None:
        nonlocal stop
        try:
            for index, group in enumerate(groups):
                await until(lambda: len(leased) >= (index + 1) * PAUSE_EVERY)  # noqa: B023
                if await first.pause(group) is not True:
                    problems.append(f"pause({group!r}) did not return True")
                paused_at[group] = tick()
            # Let every worker start several more claims: all of them must come back empty.
            settle = tick() + 10 * PAUSE_WORKERS
            await until(lambda: ticks[0] >= settle)
        finally:
            stop = True

    await asyncio.wait_for(
        asyncio.gather(operator(), *(work(t) for t in workers)), DEADLINE_S + 10.0
    )
    assert problems == []
    late = [(g, s, t) for g, s, t in leased if t > paused_at[g]]
    assert late == [], "leases granted by claims that started after the pause returned"
    done: dict[str, list[int]] = {g: [] for g in groups}
    for group, seq, _tick in leased:
        done[group].append(seq)
    for group in groups:
        info = await first.group(group)
        assert info is not None
        assert (info.state, info.depth) == ("paused", PAUSE_PER_GROUP - len(done[group]))
    assert await first.claim() is None
    for group in groups:
        assert await first.resume(group)
    while lease := await first.claim(30.0):
        done[lease.group_id].append(_seq(lease))
        assert await first.ack(lease)
    assert done == {g: list(range(PAUSE_PER_GROUP)) for g in groups}


REDRIVE_PUBLISHERS = 4
REDRIVE_EACH = 30


async def test_redrive_racing_publishes(harness: AsyncHarness) -> None:
    """Publishers append to a group while its dead letters are redriven in place: nothing is
    lost or doubled, and the group then delivers in message id order."""
    first = await harness.open()
    harness.require("dead_letters")
    for n in range(6):
        await first.publish("g", Event(kind="seed", data={"seq": n}))
    for _ in range(6):
        lease = await first.claim(30.0)
        assert lease is not None
        assert await first.dead_letter(lease, "seed")
    dead = await first.dead_letters()
    assert len(dead) == 6
    publishers = [await harness.make(queue=first.queue) for _ in range(REDRIVE_PUBLISHERS)]
    redriver = await harness.make(queue=first.queue)
    published: list[int] = []

    async def publish(index: int, transport: AsyncTransport) -> None:
        for k in range(REDRIVE_EACH):
            event = Event(kind="live", data={"seq": 1000 * (index + 1) + k})
            published.append(await transport.publish("g", event))
            await asyncio.sleep(0)

    async def redrive() -> int:
        total = 0
        for letter in dead:
            await asyncio.sleep(0)
            total += await redriver.redrive([letter.id])
        return total

    results = await asyncio.wait_for(
        asyncio.gather(redrive(), *(publish(i, t) for i, t in enumerate(publishers))),
        DEADLINE_S,
    )
    assert results[0] == 6
    delivered: list[int] = []
    while lease := await first.claim(30.0):
        delivered.append(lease.message_id)
        assert await first.ack(lease)
    assert delivered == sorted([d.message_id for d in dead] + published)
    assert await first.dead_letters() == []


TICK_WORKERS = 8
TICKS = 10


async def test_one_tick_racing_from_several_workers(harness: AsyncHarness) -> None:
    """8 workers publish each of 10 ticks of one entry at once: each tick is appended once."""
    first = await harness.open()
    harness.require("scheduling")
    workers = [first, *[await harness.make(queue=first.queue) for _ in range(TICK_WORKERS - 1)]]
    winners: list[int] = []
    for tick in range(1, TICKS + 1):
        results = await asyncio.wait_for(
            asyncio.gather(
                *(
                    w.publish_tick("every", float(tick), "g", Event(kind="tick", data={"seq": i}))
                    for i, w in enumerate(workers)
                )
            ),
            DEADLINE_S,
        )
        won = [i for i, r in enumerate(results) if r is not None]
        assert len(won) == 1, f"tick {tick}: {len(won)} workers appended it"
        winners.append(won[0])
        assert await first.last_tick("every") == float(tick)
    assert (await first.stats()).messages == TICKS
    delivered: list[int] = []
    while lease := await first.claim(30.0):
        delivered.append(_seq(lease))
        assert await first.ack(lease)
    assert delivered == winners


#: Real seconds from the delayed publish to its due time, and how late a waiter may return.
WAKE_DELAY_S = 0.8
WAKE_SLACK_S = 0.5


async def test_a_waiter_caps_its_wait_for_a_message_scheduled_meanwhile(
    harness: AsyncHarness,
) -> None:
    """A waiter that began with a long timeout before a sooner-due message was scheduled (by
    another worker), waiting again after every wake-up as a worker does, returns True by that
    message's due time: the publish's own wake-up may end one wait early, and the next wait
    must then be capped at the due time (not last its 30 seconds)."""
    waiter = await harness.open()
    harness.require("scheduling")
    harness.require("wakeups")
    assert isinstance(waiter, AsyncSupportsWakeups)
    publisher = await harness.make(queue=waiter.queue)
    quiet = False
    for _ in range(10):  # the first waits may return at once (a new listener)
        if not await waiter.wait_for_messages(0.05):
            quiet = True
            break
    assert quiet, "an idle waiter with nothing due within its timeout must return False"
    due: list[float] = []  # the due time by this clock, once published
    outcome: list[tuple[bool, float]] = []

    async def work() -> None:
        while True:
            woke = await waiter.wait_for_messages(30.0)
            at = time.monotonic()
            outcome.append((woke, at))
            if not woke or (due and at >= due[0]) or len(outcome) > 10_000:
                return

    waiting = asyncio.create_task(work())
    await asyncio.sleep(0.2)
    assert not waiting.done()
    published = time.monotonic()
    due.append(published + WAKE_DELAY_S)
    await publisher.publish("g", Event(kind="later"), delay=WAKE_DELAY_S)
    await asyncio.wait_for(waiting, WAKE_DELAY_S + WAKE_SLACK_S + 30.0)
    assert all(woke for woke, _at in outcome), f"a wait ran its 30 s past the due: {outcome}"
    at = outcome[-1][1]
    assert at >= due[0]
    assert at - published <= WAKE_DELAY_S + WAKE_SLACK_S, "a wait outlasted the due time"
