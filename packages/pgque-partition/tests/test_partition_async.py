"""The asyncio API on every backend: Exclusive with drop, the dedup window, Ordered order."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from _partition_support import AMake, Recorder

from pgque.core.models import Event
from pgque.core.worker import RetryPolicy
from pgque.partition import (
    AsyncKeyedPublisher,
    AsyncPartitionConsumer,
    Exclusive,
    KeyContext,
    Ordered,
    SlotCountMismatch,
    policy_options,
)


@pytest.mark.asyncio
async def test_async_exclusive_drop_and_dedup(async_transport_factory: AMake) -> None:
    tenants = 60
    transport = await async_transport_factory()
    publisher = AsyncKeyedPublisher(transport, tier=Exclusive())
    gate = asyncio.Semaphore(16)  # racing producers, within the client's connection limit

    async def send(t: int, copy: int) -> tuple[int, bool]:
        async with gate:
            return await publisher.send(
                "Migrate",
                {"tenant": t},
                partition_key=f"t{t}",
                dedup_key=f"migrate:t{t}:v1" if copy < 2 else None,
            )

    results = await asyncio.gather(*(send(t, c) for c in range(4) for t in range(tenants)))
    assert sum(1 for _, deduped in results if deduped) == tenants  # the second copies
    recorder = Recorder()

    async def migrate(event: Event, ctx: KeyContext) -> None:
        assert ctx.key is not None
        started = recorder.enter(ctx.key)
        if ctx.key not in recorder.done:
            await asyncio.sleep(0.001)
            recorder.did_work += 1
            recorder.done.add(ctx.key)
        recorder.exit(ctx.key, started)

    second = await async_transport_factory(queue=transport.queue)
    consumers = [
        AsyncPartitionConsumer(t, migrate, tier=Exclusive(), concurrency=4)
        for t in (transport, second)
    ]
    await asyncio.gather(*(c.run(stop_when_idle=True) for c in consumers))
    assert recorder.did_work == tenants
    assert recorder.overlaps() == 0
    assert sum(c.counts.ran + c.counts.dropped for c in consumers) == 3 * tenants


@pytest.mark.asyncio
async def test_async_ordered_slots(async_transport_factory: AMake) -> None:
    transport = await async_transport_factory()
    publisher = AsyncKeyedPublisher(transport, tier=Ordered(slots=4))
    for seq in range(10):
        for t in range(8):
            await publisher.send("FileCreated", {"seq": seq}, partition_key=f"t{t}")
    with pytest.raises(SlotCountMismatch):
        await AsyncKeyedPublisher(transport, tier=Ordered(slots=5)).send("x", partition_key="a")
    seen: dict[str, list[int]] = defaultdict(list)

    def handle(event: Event, ctx: KeyContext) -> None:
        assert ctx.key is not None
        assert isinstance(event.data, dict)
        seen[ctx.key].append(int(event.data["seq"]))  # type: ignore[arg-type]

    consumer = AsyncPartitionConsumer(transport, handle, tier=Ordered(slots=4), concurrency=4)
    await consumer.run(stop_when_idle=True)
    assert dict(seen) == {f"t{t}": list(range(10)) for t in range(8)}


@pytest.mark.asyncio
async def test_async_pause_then_release(async_transport_factory: AMake) -> None:
    transport = await async_transport_factory(**policy_options("pause", 2))
    publisher = AsyncKeyedPublisher(transport, tier=Ordered())
    for seq in range(4):
        for key in ("a", "b"):
            await publisher.send(
                "E", {"seq": seq, "bad": key == "a" and seq == 1}, partition_key=key
            )
    seen: dict[str, list[tuple[int, int]]] = defaultdict(list)

    async def handle(event: Event, ctx: KeyContext) -> None:
        assert isinstance(event.data, dict)
        if event.data["bad"]:
            raise RuntimeError("poisoned")
        assert ctx.key is not None
        seen[ctx.key].append((int(event.data["seq"]), ctx.lease.attempt))  # type: ignore[arg-type]

    consumer = AsyncPartitionConsumer(
        transport,
        handle,
        tier=Ordered(),
        policy="pause",
        concurrency=2,
        retry=RetryPolicy(base=0.02, factor=1.0, max_delay=0.02, jitter=0.0),
        idle_backoff=(0.01, 0.05),
    )
    await consumer.run(stop_when_idle=True)
    assert seen["b"] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    assert seen["a"] == [(0, 1)]
    assert (await transport.stats()).blocked == 1
    assert await consumer.release_key("a") is True
    await consumer.run(stop_when_idle=True)
    assert seen["a"] == [(0, 1), (2, 1), (3, 1)]
    assert len(await transport.dead_letters()) == 1
