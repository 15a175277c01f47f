"""pgque's own systems (memory, PostgreSQL and Redis, blocking and asyncio) under each scenario.

Blocking workers run as processes (the way they are deployed; one GIL each), asyncio workers
as tasks of one process sharing one transport, memory workers as threads (a memory store lives
in one process). Every measurement opens its connections first and starts the clock when all
workers are ready, so start-up is not counted.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue as queue_module
import threading
import time
from dataclasses import dataclass
from typing import Any

from pgque.core import (
    AsyncTransport,
    Event,
    Lease,
    SupportsPurge,
    SupportsWakeups,
    Transport,
    connect,
    connect_async,
)
from pgque_bench._common import bench_event, fresh_queue, group_of, percentile

#: Claims that find nothing in a row before a draining worker concludes the queue is empty.
_EMPTY_CLAIMS = 3
_CHUNK = 1_000
#: The hot group sorts before every cold one, so it is served first and then waits its turn.
_HOT = "a_hot"


@dataclass(frozen=True)
class System:
    """One pgque transport to measure: a label, its URL and whether it is the asyncio API."""

    name: str
    url: str
    is_async: bool

    @property
    def is_memory(self) -> bool:
        """Tell whether this is the in-memory transport (threads in one process)."""
        return self.url.startswith("memory:")

    @property
    def is_postgres(self) -> bool:
        """Tell whether this is a PostgreSQL transport."""
        return self.url.startswith(("postgresql:", "postgres:"))


def systems(postgres_url: str | None, redis_url: str | None) -> list[System]:
    """Return the pgque systems of one run: memory, then each server's sync and async API."""
    out = [System("memory", "memory://bench", False)]
    if postgres_url:
        out += [
            System("postgres", postgres_url, False),
            System("postgres-async", postgres_url, True),
        ]
    if redis_url:
        out += [System("redis", redis_url, False), System("redis-async", redis_url, True)]
    return out


def open_sync(system: System, queue: str, workers: int = 1) -> Transport:
    """Open a blocking transport of *system* on *queue*."""
    options: dict[str, Any] = {"queue": queue}
    if system.is_postgres:
        options.update(min_size=1, max_size=max(1, workers))
    return connect(system.url, **options)


def open_async(system: System, queue: str, workers: int = 1) -> AsyncTransport:
    """Return an asyncio transport of *system* on *queue* (it connects on first use)."""
    options: dict[str, Any] = {"queue": queue}
    if system.is_postgres:
        options.update(min_size=max(1, workers), max_size=max(1, workers))
    return connect_async(system.url, **options)


def purge(transport: Transport) -> None:
    """Delete the queue's rows or keys when the transport can (not part of the contract)."""
    if isinstance(transport, SupportsPurge):
        transport.purge()


def prefill(system: System, queue: str, messages: int, groups: int) -> None:
    """Publish *messages* dealt round-robin over *groups* groups, in batches."""
    transport = open_sync(system, queue)
    try:
        event = bench_event()
        for start in range(0, messages, _CHUNK):
            stop = min(messages, start + _CHUNK)
            transport.publish_many([(group_of(i, groups), event) for i in range(start, stop)])
    finally:
        transport.close()


# -- drain ---------------------------------------------------------------------------------


def _drain_loop(transport: Transport, batch: int) -> int:
    done = empty = 0
    while empty < _EMPTY_CLAIMS:
        if batch == 1:
            lease = transport.claim(60.0)
            leases = [] if lease is None else [lease]
        else:
            leases = transport.claim_many(batch, 60.0)
        if not leases:
            empty += 1
            time.sleep(0.005)
            continue
        empty = 0
        if batch == 1:
            transport.ack(leases[0])
        else:
            transport.ack_many(leases)
        done += len(leases)
    return done


async def _adrain_loop(transport: AsyncTransport, batch: int) -> int:
    done = empty = 0
    while empty < _EMPTY_CLAIMS:
        if batch == 1:
            lease = await transport.claim(60.0)
            leases = [] if lease is None else [lease]
        else:
            leases = await transport.claim_many(batch, 60.0)
        if not leases:
            empty += 1
            await asyncio.sleep(0.005)
            continue
        empty = 0
        if batch == 1:
            await transport.ack(leases[0])
        else:
            await transport.ack_many(leases)
        done += len(leases)
    return done


def _process_drainer(
    system: System, queue: str, batch: int, barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    transport = open_sync(system, queue)
    try:
        transport.stats()  # connect before the clock starts
        barrier.wait()
        results.put(_drain_loop(transport, batch))
    finally:
        transport.close()


def drain(system: System, workers: int, messages: int, groups: int, batch: int) -> dict[str, Any]:
    """Drain a backlog of *messages* over *groups* with *workers*; return the rate."""
    queue = fresh_queue()
    prefill(system, queue, messages, groups)
    try:
        if system.is_async:
            done, seconds = asyncio.run(_drain_async(system, queue, workers, batch))
        elif system.is_memory:
            done, seconds = _drain_threads(system, queue, workers, batch)
        else:
            done, seconds = _drain_processes(system, queue, workers, batch)
    finally:
        cleaner = open_sync(system, queue)
        purge(cleaner)
        cleaner.close()
    return {"messages": done, "seconds": seconds, "rate": done / seconds if seconds else 0.0}


def _drain_processes(system: System, queue: str, workers: int, batch: int) -> tuple[int, float]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers + 1)
    results = context.Queue()
    procs = [
        context.Process(target=_process_drainer, args=(system, queue, batch, barrier, results))
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    barrier.wait(timeout=120)
    start = time.perf_counter()
    done = sum(int(results.get(timeout=900)) for _ in procs)
    seconds = time.perf_counter() - start
    for proc in procs:
        proc.join(30)
    return done, seconds


def _drain_threads(system: System, queue: str, workers: int, batch: int) -> tuple[int, float]:
    transports = [open_sync(system, queue) for _ in range(workers)]
    counts = [0] * workers

    def run(index: int) -> None:
        counts[index] = _drain_loop(transports[index], batch)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    for transport in transports:
        transport.close()
    return sum(counts), seconds


async def _drain_async(system: System, queue: str, workers: int, batch: int) -> tuple[int, float]:
    transport = open_async(system, queue, workers)
    try:
        await transport.stats()
        start = time.perf_counter()
        counts = await asyncio.gather(*(_adrain_loop(transport, batch) for _ in range(workers)))
        return sum(counts), time.perf_counter() - start
    finally:
        await transport.close()


# -- publish -------------------------------------------------------------------------------


def publish(system: System, messages: int, groups: int, batch: int) -> dict[str, Any]:
    """Publish *messages* one by one (*batch* 1) or with publish_many; return the rate."""
    queue = fresh_queue()
    if system.is_async:
        seconds = asyncio.run(_publish_async(system, queue, messages, groups, batch))
    else:
        transport = open_sync(system, queue)
        try:
            transport.stats()
            event = bench_event()
            start = time.perf_counter()
            if batch == 1:
                for i in range(messages):
                    transport.publish(group_of(i, groups), event)
            else:
                for first in range(0, messages, batch):
                    items = range(first, min(messages, first + batch))
                    transport.publish_many([(group_of(i, groups), event) for i in items])
            seconds = time.perf_counter() - start
        finally:
            purge(transport)
            transport.close()
    return {"messages": messages, "seconds": seconds, "rate": messages / seconds}


async def _publish_async(
    system: System, queue: str, messages: int, groups: int, batch: int
) -> float:
    transport = open_async(system, queue)
    try:
        await transport.stats()
        event = bench_event()
        start = time.perf_counter()
        if batch == 1:
            for i in range(messages):
                await transport.publish(group_of(i, groups), event)
        else:
            for first in range(0, messages, batch):
                items = range(first, min(messages, first + batch))
                await transport.publish_many([(group_of(i, groups), event) for i in items])
        seconds = time.perf_counter() - start
        cleaner = open_sync(system, queue)
        purge(cleaner)
        cleaner.close()
        return seconds
    finally:
        await transport.close()


# -- latency -------------------------------------------------------------------------------


def _stamped(sent: float) -> Event:
    return Event(kind="bench", data={"t": sent})


def _latency_of(lease: Lease) -> float:
    data = lease.event.data
    sent = data.get("t") if isinstance(data, dict) else None
    return time.time() - float(sent) if isinstance(sent, (int, float)) else float("nan")


def _consumer(
    system: System, queue: str, expected: int, deadline_s: float, ready: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """Claim like an idle worker (wake-up when the transport has one); report latencies."""
    transport = open_sync(system, queue)
    waiter = transport.wait_for_messages if isinstance(transport, SupportsWakeups) else None
    latencies: list[float] = []
    try:
        transport.stats()
        if waiter is not None:
            waiter(0.01)  # subscribe before the first publish
        ready.set()
        deadline = time.monotonic() + deadline_s
        while len(latencies) < expected and time.monotonic() < deadline:
            lease = transport.claim(30.0)
            if lease is None:
                if waiter is not None:
                    waiter(1.0)
                else:
                    time.sleep(0.05)  # the worker's first idle back-off
                continue
            latencies.append(_latency_of(lease))
            transport.ack(lease)
    finally:
        results.put(latencies)
        transport.close()


def latency(system: System, samples: int, rate: float | None, seconds: float) -> dict[str, Any]:
    """Measure publish-to-claim latency with one consumer process.

    Idle (*rate* None): *samples* publishes, 20-40 ms apart, each into an empty queue. Under
    load: publishes paced at *rate* per second for *seconds*.
    """
    queue = fresh_queue()
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    results = context.Queue()
    expected = samples if rate is None else int(rate * seconds)
    consumer = context.Process(
        target=_consumer, args=(system, queue, expected, seconds + 60.0, ready, results)
    )
    consumer.start()
    producer = open_sync(system, queue)
    latencies: list[float] = []
    try:
        ready.wait(120)
        if rate is None:
            for i in range(samples):
                producer.publish(group_of(i, 50), _stamped(time.time()))
                time.sleep(0.02 + (i % 3) * 0.01)
        else:
            interval = 1.0 / rate
            start = time.perf_counter()
            for i in range(expected):
                pause = start + i * interval - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                producer.publish(group_of(i, 1_000), _stamped(time.time()))
        try:
            latencies = list(results.get(timeout=seconds + 90.0))
        except queue_module.Empty:
            latencies = []
        consumer.join(30)
    finally:
        purge(producer)
        producer.close()
    ms = [x * 1000 for x in latencies if x == x]
    return {
        "samples": len(ms),
        "rate": rate,
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else None,
        "cdf_ms": sorted(ms),
    }


# -- fairness, scale -----------------------------------------------------------------------


def fairness(system: System, hot: int, cold_groups: int, per_cold: int = 5) -> dict[str, Any]:
    """Count claims until each of *cold_groups* was served once beside one hot group."""
    queue = fresh_queue()
    transport = open_sync(system, queue)
    try:
        event = bench_event()
        for start in range(0, hot, _CHUNK):
            size = min(_CHUNK, hot - start)
            transport.publish_many([(_HOT, event)] * size)
        cold = [f"c{i:05d}" for i in range(cold_groups)]
        for start in range(0, len(cold), 200):
            transport.publish_many(
                [(g, event) for g in cold[start : start + 200] for _ in range(per_cold)]
            )
        waiting = set(cold)
        claims = hot_claims = 0
        while waiting and claims < hot + cold_groups * per_cold:
            lease = transport.claim(60.0)
            if lease is None:
                break
            claims += 1
            if lease.group_id == _HOT:
                hot_claims += 1
            waiting.discard(lease.group_id)
            transport.ack(lease)
        return {
            "claims": claims,
            "hot_claims": hot_claims,
            "cold_groups": cold_groups,
            "unserved": len(waiting),
        }
    finally:
        purge(transport)
        transport.close()


def claim_latencies(transport: Transport, claims: int) -> list[float]:
    """Time *claims* single claims (each acked afterwards, untimed); milliseconds."""
    out: list[float] = []
    for _ in range(claims):
        start = time.perf_counter()
        lease = transport.claim(60.0)
        out.append((time.perf_counter() - start) * 1000)
        if lease is None:
            break
        transport.ack(lease)
    return out
