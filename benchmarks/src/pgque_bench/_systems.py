"""pgque's own systems (memory, PostgreSQL and Redis, blocking and asyncio) under each scenario.

Every function here runs inside one case process (see ``_case``). Blocking transport loops run
as processes of their own (the way they are deployed; one GIL each), asyncio loops as tasks of
one process sharing one transport, memory loops as threads (a memory store lives in one
process). Every drain prefills its backlog, connects, and starts the clock once every consumer
is connected; it fails (an error, not a number) unless every message was settled.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import queue as queue_module
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pgque.core import (
    AsyncTransport,
    AsyncWorker,
    Event,
    Lease,
    Settlement,
    SupportsPurge,
    SupportsWakeups,
    Transport,
    Worker,
    connect,
    connect_async,
)
from pgque_bench._common import bench_event, fresh_queue, group_of, percentile

_CHUNK = 1_000
#: The hot group sorts before every cold one, so it is served first and then waits its turn.
_HOT = "a_hot"
#: Messages the latency scenario drains first to measure one consumer's capacity.
_CALIBRATION = 300


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


def system_named(name: str, postgres_url: str | None, redis_url: str | None) -> System:
    """Return the system called *name*. Raises KeyError when its server is not configured."""
    for system in systems(postgres_url, redis_url):
        if system.name == name:
            return system
    raise KeyError(f"no system {name!r} (is its server configured?)")


def open_sync(system: System, queue: str, connections: int = 1, **more: Any) -> Transport:
    """Open a blocking transport of *system* on *queue* (a pool of *connections* on
    PostgreSQL); *more* are further transport options (``history="7d"``)."""
    options: dict[str, Any] = {"queue": queue, **more}
    if system.is_postgres:
        options.update(min_size=1, max_size=max(1, connections))
    return connect(system.url, **options)


def open_async(system: System, queue: str, connections: int = 1, **more: Any) -> AsyncTransport:
    """Return an asyncio transport of *system* on *queue* (it connects on first use); *more*
    are further transport options."""
    options: dict[str, Any] = {"queue": queue, **more}
    if system.is_postgres:
        options.update(min_size=max(1, connections), max_size=max(1, connections))
    return connect_async(system.url, **options)


def has_fused(transport: Transport | AsyncTransport) -> bool:
    """Tell whether *transport* implements ``settle_and_claim`` (the fused call)."""
    return callable(getattr(transport, "settle_and_claim", None))


def purge(transport: Transport) -> None:
    """Delete the queue's rows or keys when the transport can (not part of the contract)."""
    if isinstance(transport, SupportsPurge):
        transport.purge()


def _cleanup(system: System, queue: str) -> None:
    if system.is_memory:
        return  # the store dies with the process
    cleaner = open_sync(system, queue)
    try:
        purge(cleaner)
    finally:
        cleaner.close()


def prefill(transport: Transport, messages: int, groups: int) -> None:
    """Publish *messages* dealt round-robin over *groups* groups, in batches."""
    event = bench_event()
    for start in range(0, messages, _CHUNK):
        stop = min(messages, start + _CHUNK)
        transport.publish_many([(group_of(i, groups), event) for i in range(start, stop)])


class DrainFailed(Exception):
    """A drainer process failed; the message is its own error line."""


def _check_drained(done: int, messages: int, what: str) -> None:
    if done != messages:
        raise RuntimeError(f"{what} settled {done:,} of {messages:,} messages")


def _result(done: int, seconds: float, **extra: object) -> dict[str, Any]:
    return {"messages": done, "seconds": seconds, "rate": done / seconds, **extra}


# -- transport loops -----------------------------------------------------------------------
#
# mode "ack": claim (batch 1) or claim_many(batch), then ack or ack_many.
# mode "fused": settle_and_claim(acks of the previous claim, batch) per call; fails when the
#   transport has no settle_and_claim.
# mode "settle": "fused" when the transport has settle_and_claim, else "ack".


def _effective_mode(transport: Transport | AsyncTransport, mode: str) -> str:
    if mode == "settle":
        return "fused" if has_fused(transport) else "ack"
    if mode == "fused" and not has_fused(transport):
        raise RuntimeError(f"{type(transport).__name__} has no settle_and_claim")
    return mode


def _claim(transport: Transport, batch: int) -> list[Lease]:
    if batch == 1:
        lease = transport.claim(60.0)
        return [] if lease is None else [lease]
    return transport.claim_many(batch, 60.0)


def _drain_loop(transport: Transport, batch: int, mode: str) -> int:
    """Drain until the queue holds no message; return how many this loop settled."""
    done = 0
    leases: list[Lease] = []
    while True:
        if mode == "fused":
            result = transport.settle_and_claim([Settlement.ack(x) for x in leases], batch, 60.0)
            done += sum(result.settled)
            leases = result.leases
        else:
            if leases:
                if batch == 1:
                    done += int(transport.ack(leases[0]))
                else:
                    done += sum(transport.ack_many(leases))
            leases = _claim(transport, batch)
        if not leases:
            if transport.stats().messages == 0:
                return done
            time.sleep(0.002)  # the rest is in flight elsewhere


async def _adrain_loop(transport: AsyncTransport, batch: int, mode: str) -> int:
    done = 0
    leases: list[Lease] = []
    while True:
        if mode == "fused":
            settlements = [Settlement.ack(x) for x in leases]
            result = await transport.settle_and_claim(settlements, batch, 60.0)
            done += sum(result.settled)
            leases = result.leases
        else:
            if leases:
                if batch == 1:
                    done += int(await transport.ack(leases[0]))
                else:
                    done += sum(await transport.ack_many(leases))
            if batch == 1:
                lease = await transport.claim(60.0)
                leases = [] if lease is None else [lease]
            else:
                leases = await transport.claim_many(batch, 60.0)
        if not leases:
            if (await transport.stats()).messages == 0:
                return done
            await asyncio.sleep(0.002)


def _process_drainer(
    system: System, queue: str, batch: int, mode: str, barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    transport = open_sync(system, queue)
    try:
        effective = _effective_mode(transport, mode)
        transport.stats()  # connect before the clock starts
        barrier.wait()
        results.put(("ok", _drain_loop(transport, batch, effective), effective))
    except Exception as exc:
        barrier.abort()
        results.put(("error", f"{type(exc).__name__}: {exc}", mode))
    finally:
        transport.close()


def transport_drain(
    system: System, workers: int, groups: int, per_group: int, batch: int, mode: str
) -> dict[str, Any]:
    """Drain *groups* x *per_group* messages with *workers* loops of the transport; the rate."""
    queue = fresh_queue()
    messages = groups * per_group
    try:
        if system.is_async:
            done, seconds, used = asyncio.run(
                _drain_async(system, queue, workers, messages, groups, batch, mode)
            )
        elif system.is_memory:
            done, seconds, used = _drain_threads(
                system, queue, workers, messages, groups, batch, mode
            )
        else:
            filler = open_sync(system, queue)
            try:
                prefill(filler, messages, groups)
            finally:
                filler.close()
            done, seconds, used = _drain_processes(system, queue, workers, batch, mode)
    finally:
        _cleanup(system, queue)
    _check_drained(done, messages, f"{system.name} {mode} drain")
    return _result(done, seconds, settle=used)


def _drain_processes(
    system: System, queue: str, workers: int, batch: int, mode: str
) -> tuple[int, float, str]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers + 1)
    results = context.Queue()
    procs = [
        context.Process(
            target=_process_drainer, args=(system, queue, batch, mode, barrier, results)
        )
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=120)  # broken: a drainer failed, its error is on the queue
    start = time.perf_counter()
    done, used, errors = 0, mode, []
    for _ in procs:
        status, value, effective = results.get(timeout=900)
        if status == "ok":
            done += int(value)
            used = effective
        else:
            errors.append(str(value))
    seconds = time.perf_counter() - start
    for proc in procs:
        proc.join(30)
    if errors:
        raise DrainFailed(errors[0])
    return done, seconds, used


def _drain_threads(
    system: System, queue: str, workers: int, messages: int, groups: int, batch: int, mode: str
) -> tuple[int, float, str]:
    transports = [open_sync(system, queue) for _ in range(workers)]
    prefill(transports[0], messages, groups)
    used = _effective_mode(transports[0], mode)
    counts = [0] * workers

    def run(index: int) -> None:
        counts[index] = _drain_loop(transports[index], batch, used)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    for transport in transports:
        transport.close()
    return sum(counts), seconds, used


async def _drain_async(
    system: System, queue: str, workers: int, messages: int, groups: int, batch: int, mode: str
) -> tuple[int, float, str]:
    filler = open_sync(system, queue)
    try:
        prefill(filler, messages, groups)
    finally:
        filler.close()
    transport = open_async(system, queue, workers)
    try:
        used = _effective_mode(transport, mode)
        await transport.stats()
        start = time.perf_counter()
        loops = (_adrain_loop(transport, batch, used) for _ in range(workers))
        counts = await asyncio.gather(*loops)
        return sum(counts), time.perf_counter() - start, used
    finally:
        await transport.close()


# -- the Worker classes --------------------------------------------------------------------


def _noop(event: Event) -> None:
    """The sync worker's no-op handler."""


async def _anoop(event: Event) -> None:
    """The asyncio worker's no-op handler."""


def _handlers(sleep: float) -> tuple[Callable[[Event], None], Callable[[Event], Awaitable[None]]]:
    """The (sync, async) handlers of a worker case: no-ops, or ones that wait *sleep* seconds
    (an I/O-bound handler: a request to another service)."""
    if not sleep:
        return _noop, _anoop

    def wait(event: Event) -> None:
        time.sleep(sleep)

    async def await_(event: Event) -> None:
        await asyncio.sleep(sleep)

    return wait, await_


def worker_drain(
    system: System,
    concurrency: int | None,
    groups: int,
    per_group: int,
    history: str | None = None,
    sleep: float = 0.0,
    connections: int | None = None,
) -> dict[str, Any]:
    """Drain the backlog with pgque's Worker (blocking system) or AsyncWorker (asyncio system).

    *concurrency* None leaves the worker's default (1). The transport's pool holds
    *connections* (default: one connection per slot and a spare); the clock starts after it
    connected and stops when ``run(stop_when_idle=True)`` returns; every message must have
    been acked. With *history* (``"7d"``), the queue records job history (its ``history``
    option) while it drains. *sleep*: seconds each handler waits (0: a no-op handler).
    """
    queue = fresh_queue()
    messages = groups * per_group
    slots = concurrency or 1
    pool = connections or slots + 1
    options: dict[str, Any] = {} if concurrency is None else {"concurrency": concurrency}
    more: dict[str, Any] = {} if history is None else {"history": history}
    handle, ahandle = _handlers(sleep)
    try:
        filler = open_sync(system, queue, **more)
        try:
            prefill(filler, messages, groups)
        finally:
            filler.close()
        if system.is_async:
            acked, seconds = asyncio.run(_async_worker(system, queue, pool, ahandle, options, more))
        else:
            transport = open_sync(system, queue, pool, **more)
            try:
                transport.stats()
                worker = Worker(transport, handle, **options)
                start = time.perf_counter()
                report = worker.run(stop_when_idle=True, install_signal_handlers=False)
                seconds = time.perf_counter() - start
                acked = report.acked
            finally:
                transport.close()
    finally:
        _cleanup(system, queue)
    _check_drained(acked, messages, f"{system.name} worker")
    return _result(acked, seconds)


async def _async_worker(
    system: System,
    queue: str,
    connections: int,
    handle: Callable[[Event], Awaitable[None]],
    options: dict[str, Any],
    more: dict[str, Any],
) -> tuple[int, float]:
    transport = open_async(system, queue, connections, **more)
    try:
        await transport.stats()
        worker = AsyncWorker(transport, handle, **options)
        start = time.perf_counter()
        report = await worker.run(stop_when_idle=True, install_signal_handlers=False)
        return report.acked, time.perf_counter() - start
    finally:
        await transport.close()


def publish(system: System, messages: int, groups: int, batch: int) -> dict[str, Any]:
    """Publish *messages* one by one (*batch* 1) or with publish_many; return the rate."""
    queue = fresh_queue()
    try:
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
                stored = transport.stats().messages
            finally:
                transport.close()
            _check_drained(stored, messages, f"{system.name} publish (stored)")
    finally:
        _cleanup(system, queue)
    return _result(messages, seconds)


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
        _check_drained((await transport.stats()).messages, messages, "publish (stored)")
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


def consumer_capacity(system: System) -> float:
    """Return one blocking claim/ack consumer's drain rate (messages/s) on a small backlog."""
    queue = fresh_queue()
    transport = open_sync(system, queue)
    try:
        prefill(transport, _CALIBRATION, _CALIBRATION)
        start = time.perf_counter()
        done = _drain_loop(transport, 1, "ack")
        return done / (time.perf_counter() - start)
    finally:
        purge(transport)
        transport.close()


#: The share of one consumer's measured capacity each latency mode publishes at.
LOAD_SHARE = {"idle": None, "load": 0.5, "load90": 0.9}


def latency(system: System, mode: str, samples: int, seconds: float) -> dict[str, Any]:
    """Measure publish-to-claim latency with one consumer process.

    *mode* "idle": *samples* publishes, 20-40 ms apart, each into an empty queue. "load" and
    "load90": publishes paced at 50% / 90% of one consumer's measured capacity for *seconds*.
    """
    queue = fresh_queue()
    share = LOAD_SHARE[mode]
    rate = None if share is None else share * consumer_capacity(system)
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    results = context.Queue()
    expected = samples if rate is None else max(1, int(rate * seconds))
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
    if len(ms) < expected:
        raise RuntimeError(f"the consumer saw {len(ms)} of {expected} messages")
    return {
        "samples": len(ms),
        "rate": rate,
        "share": share,
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else None,
        "cdf_ms": sorted(ms),
    }


# -- fairness, claim cost ------------------------------------------------------------------


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
            "hot": hot,
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
