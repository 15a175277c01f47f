"""The concurrent-drain test of the asyncio suite: 8 tasks, each with its own transport.

Hand-written (not generated): tasks and threads need different synchronisation. Its blocking
counterpart is ``_concurrency_sync.py``.
"""

from __future__ import annotations

import asyncio

from pgque.conformance._harness_async import AsyncHarness
from pgque.core import AsyncTransport, Event

__all__ = ["test_concurrent_drain_tasks", "GROUPS", "PER_GROUP", "WORKERS"]

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
