"""One chaos worker process: a real :class:`pgque.core.worker.Worker` that records everything.

Run as ``python -m pgque_chaos.worker SPEC_JSON``. Every claim, handler entry and exit,
extension and settlement is appended as one JSON line to the process's own record file with a
single ``os.write`` on an ``O_APPEND`` descriptor: no buffering in the process, so a
``kill -9`` loses at most the line being built, and the lines of the worker's threads never
interleave. No fsync: the kernel keeps what was written when the process dies.

Times in the records (``t``) are real wall-clock seconds read with
``clock_gettime(CLOCK_REALTIME)``, which the clock-jump scenario does not touch (it offsets
``time.time`` only), so they compare with the servers' clocks on this machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, cast

__all__ = ["WorkerSpec", "Recorder", "main"]


def real_time() -> float:
    """Return the real wall clock (epoch seconds), whatever offset ``time.time`` was given."""
    return time.clock_gettime(time.CLOCK_REALTIME)


@dataclass
class WorkerSpec:
    """What one worker process does: where, how fast, and which fault it carries."""

    url: str
    queue: str
    name: str
    record_path: str
    visibility: float
    concurrency: int = 4
    work_s: tuple[float, float] = (0.0, 0.004)
    #: fraction of first attempts that are slow, and how long they take
    slow_fraction: float = 0.0
    slow_s: float = 0.0
    #: fraction of first attempts whose handler raises (the worker nacks them)
    fail_fraction: float = 0.0
    #: the handler's database effect (PostgreSQL): "" none; "tx" one row per run inserted in
    #: the transaction the lease is settled in (settle_in); "plain" the same row inserted on
    #: a connection of its own before the worker's ack (at least once)
    effect: str = ""
    #: the table the effect's rows go to (message_id, worker)
    effect_table: str = ""
    #: False: the worker's lease renewals never reach the server (the lease simply expires)
    extend: bool = True
    #: seconds added to this process's time.time (a clock that jumped)
    clock_offset_s: float = 0.0
    #: seconds after start at which the clock jumps (0: wrong from the start)
    clock_jump_after_s: float = 0.0
    seed: int = 0
    #: "sync": Worker on the blocking transport; "async": AsyncWorker on the asyncio one
    mode: str = "sync"

    def to_json(self) -> str:
        """Return the spec as JSON (the worker process's one argument)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        """Parse a spec written by :meth:`to_json`."""
        values = json.loads(text)
        values["work_s"] = tuple(values["work_s"])
        return cls(**values)


class Recorder:
    """Append JSON lines to a file, one ``os.write`` per line (atomic with ``O_APPEND``)."""

    def __init__(self, path: str, worker: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._worker = worker

    def write(self, kind: str, **fields: Any) -> None:
        """Record one event of *kind* with its fields and the real time."""
        line = {"k": kind, "w": self._worker, "t": real_time(), **fields}
        os.write(self._fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


class RecordingTransport:
    """Wrap a transport: record what claim, extend, ack and nack returned, or that they failed.

    Everything else goes straight to the wrapped transport.
    """

    def __init__(self, inner: Any, recorder: Recorder, *, extend: bool) -> None:
        self._inner = inner
        self._rec = recorder
        self._extend = extend

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _call(self, op: str, lease: Any, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:
            token = None if lease is None else lease.token
            self._rec.write("err", op=op, token=token, error=type(exc).__name__)
            raise

    def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Any:
        """Claim, recording the lease granted (its server-side expiry and attempt)."""
        lease = self._call(
            "claim",
            None,
            lambda: self._inner.claim(visibility, min_priority=min_priority, holder=holder),
        )
        if lease is not None:
            self.claimed(lease, visibility)
        return lease

    def claimed(self, lease: Any, visibility: float) -> None:
        """Record a lease granted: its server-side expiry and attempt."""
        self._rec.write(
            "claim",
            token=lease.token,
            mid=lease.message_id,
            g=lease.group_id,
            attempt=lease.attempt,
            exp=lease.expires_at,
            vis=visibility,
        )

    def settle_and_claim(
        self,
        settlements: Any,
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: Any = None,
    ) -> Any:
        """Settle and claim in one call (the worker's), recording each settlement's result
        (as its single call would) and each lease granted."""
        self.sending_many(settlements)
        result = self._call(
            "settle_and_claim",
            settlements[0].lease if settlements else None,
            lambda: self._inner.settle_and_claim(
                settlements, n, visibility, min_priority=min_priority, holder=holder
            ),
        )
        self.settled(settlements, result, visibility)
        return result

    def sending(self, op: str, lease: Any) -> None:
        """Record that a nack, release or dead-letter of *lease* is being sent: killed before
        its reply, the worker records no result, but the store may have done it."""
        self._rec.write("sending", op=op, token=lease.token)

    def sending_many(self, settlements: Any) -> None:
        """:meth:`sending` for each settlement of a settle_and_claim other than an ack."""
        for item in settlements:
            if item.outcome != "ack":
                self.sending(item.outcome, item.lease)

    def settled(self, settlements: Any, result: Any, visibility: float) -> None:
        """Record what one settle_and_claim did: settlements first, then the leases."""
        for item, done in zip(settlements, result.settled, strict=True):
            self._rec.write(item.outcome, token=item.lease.token, ok=bool(done))
        for lease in result.leases:
            self.claimed(lease, visibility)

    def extend(self, lease: Any, visibility: float) -> Any:
        """Extend, recording the new expiry (or the loss); a no-op when extension is off."""
        if not self._extend:
            return lease
        renewed = self._call("extend", lease, lambda: self._inner.extend(lease, visibility))
        exp = None if renewed is None else renewed.expires_at
        self._rec.write("extend", token=lease.token, exp=exp)
        return renewed

    def ack(self, lease: Any) -> bool:
        """Ack, recording the result (False: fenced out)."""
        done = bool(self._call("ack", lease, lambda: self._inner.ack(lease)))
        self._rec.write("ack", token=lease.token, ok=done)
        return done

    def nack(self, lease: Any, *, delay: float = 0.0, error: Any = None) -> bool:
        """Nack, recording the result."""
        self.sending("nack", lease)
        done = bool(
            self._call("nack", lease, lambda: self._inner.nack(lease, delay=delay, error=error))
        )
        self._rec.write("nack", token=lease.token, ok=done)
        return done

    def release(self, lease: Any) -> bool:
        """Release (a worker stopping gives the message back), recording the result."""
        self.sending("release", lease)
        done = bool(self._call("release", lease, lambda: self._inner.release(lease)))
        self._rec.write("release", token=lease.token, ok=done)
        return done

    def dead_letter(self, lease: Any, reason: str, *, error: Any = None) -> bool:
        """Dead-letter, recording the result (the chaos handlers never reject)."""
        done = bool(
            self._call(
                "dead_letter", lease, lambda: self._inner.dead_letter(lease, reason, error=error)
            )
        )
        self._rec.write("dead_letter", token=lease.token, ok=done)
        return done


class AsyncRecordingTransport:
    """The asyncio twin of :class:`RecordingTransport` (same records)."""

    def __init__(self, inner: Any, recorder: Recorder, *, extend: bool) -> None:
        self._inner = inner
        self._rec = recorder
        self._extend = extend
        # the records are written by the synchronous wrapper's helpers
        self._sync = RecordingTransport(inner, recorder, extend=extend)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _call(self, op: str, lease: Any, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await call()
        except Exception as exc:
            token = None if lease is None else lease.token
            self._rec.write("err", op=op, token=token, error=type(exc).__name__)
            raise

    async def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Any:
        """Claim, recording the lease granted."""
        lease = await self._call(
            "claim",
            None,
            lambda: self._inner.claim(visibility, min_priority=min_priority, holder=holder),
        )
        if lease is not None:
            self._sync.claimed(lease, visibility)
        return lease

    async def settle_and_claim(
        self,
        settlements: Any,
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: Any = None,
    ) -> Any:
        """Settle and claim in one call, recording as the blocking twin does."""
        self._sync.sending_many(settlements)
        result = await self._call(
            "settle_and_claim",
            settlements[0].lease if settlements else None,
            lambda: self._inner.settle_and_claim(
                settlements, n, visibility, min_priority=min_priority, holder=holder
            ),
        )
        self._sync.settled(settlements, result, visibility)
        return result

    async def extend(self, lease: Any, visibility: float) -> Any:
        """Extend, recording the new expiry (or the loss); a no-op when extension is off."""
        if not self._extend:
            return lease
        renewed = await self._call("extend", lease, lambda: self._inner.extend(lease, visibility))
        exp = None if renewed is None else renewed.expires_at
        self._rec.write("extend", token=lease.token, exp=exp)
        return renewed

    async def ack(self, lease: Any) -> bool:
        """Ack, recording the result."""
        done = bool(await self._call("ack", lease, lambda: self._inner.ack(lease)))
        self._rec.write("ack", token=lease.token, ok=done)
        return done

    async def nack(self, lease: Any, *, delay: float = 0.0, error: Any = None) -> bool:
        """Nack, recording the result."""
        self._sync.sending("nack", lease)
        done = bool(
            await self._call(
                "nack", lease, lambda: self._inner.nack(lease, delay=delay, error=error)
            )
        )
        self._rec.write("nack", token=lease.token, ok=done)
        return done

    async def release(self, lease: Any) -> bool:
        """Release, recording the result."""
        self._sync.sending("release", lease)
        done = bool(await self._call("release", lease, lambda: self._inner.release(lease)))
        self._rec.write("release", token=lease.token, ok=done)
        return done

    async def dead_letter(self, lease: Any, reason: str, *, error: Any = None) -> bool:
        """Dead-letter, recording the result."""
        done = bool(
            await self._call(
                "dead_letter", lease, lambda: self._inner.dead_letter(lease, reason, error=error)
            )
        )
        self._rec.write("dead_letter", token=lease.token, ok=done)
        return done


class _Effects:
    """The handler's database effect: one row per run in the effect table (see WorkerSpec).

    ``tx``: inside ``settle_in`` (the row and the ack commit together; the ``exit`` record is
    written inside, before the commit, so a kill after it is a redelivery, never a loss).
    ``plain``: on a connection of its own, committed at once, before the worker's ack.
    """

    def __init__(self, spec: WorkerSpec, rec: Recorder) -> None:
        self._spec = spec
        self._rec = rec
        self.transport: Any = None
        self._local = threading.local()
        self._apool: Any = None

    def _insert(self) -> Any:
        from psycopg import sql

        return sql.SQL("INSERT INTO {} (message_id, worker) VALUES (%s, %s)").format(
            sql.Identifier(self._spec.effect_table)
        )

    def run(self, lease: Any, pause: float) -> None:
        row = (lease.message_id, self._spec.name)
        if self._spec.effect == "tx":
            with self.transport.settle_in(lease) as tx:
                tx.connection.execute(self._insert(), row)
                time.sleep(pause)
                self._rec.write("exit", token=lease.token, mid=lease.message_id)
            return
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            import psycopg

            conn = self._local.conn = psycopg.connect(self._spec.url, autocommit=True)
        conn.execute(self._insert(), row)
        time.sleep(pause)
        self._rec.write("exit", token=lease.token, mid=lease.message_id)

    async def arun(self, lease: Any, pause: float) -> None:
        row = (lease.message_id, self._spec.name)
        if self._spec.effect == "tx":
            async with self.transport.settle_in(lease) as tx:
                await tx.connection.execute(self._insert(), row)
                await asyncio.sleep(pause)
                self._rec.write("exit", token=lease.token, mid=lease.message_id)
            return
        if self._apool is None:
            from psycopg_pool import AsyncConnectionPool

            self._apool = AsyncConnectionPool(
                self._spec.url, min_size=1, max_size=4, kwargs={"autocommit": True}, open=False
            )
            await self._apool.open()
        async with self._apool.connection() as conn:
            await conn.execute(self._insert(), row)
        await asyncio.sleep(pause)
        self._rec.write("exit", token=lease.token, mid=lease.message_id)


def _jump_clock(offset: float, after: float) -> None:
    """Make this process's ``time.time`` jump by *offset* seconds, *after* seconds from now."""
    if not offset:
        return
    real, real_ns = time.time, time.time_ns
    start = real()

    def jumped() -> float:
        now = real()
        return now + offset if now - start >= after else now

    def jumped_ns() -> int:
        now = real_ns()
        return now + int(offset * 1e9) if now / 1e9 - start >= after else now

    time.time = jumped
    time.time_ns = jumped_ns


def main(argv: list[str]) -> int:
    """Run the worker described by ``argv[1]`` until SIGTERM; return the exit status."""
    spec = WorkerSpec.from_json(argv[1])
    _jump_clock(spec.clock_offset_s, spec.clock_jump_after_s)
    from pgque.core.models import Event, Lease

    rec = Recorder(spec.record_path, spec.name)
    rng = random.Random(spec.seed)
    rng_lock = threading.Lock()

    def pause_for(lease: Lease) -> float:
        with rng_lock:
            pause = rng.uniform(*spec.work_s)
            if lease.attempt == 1 and rng.random() < spec.slow_fraction:
                pause = spec.slow_s
        return pause

    def entered(event: Event, lease: Lease) -> None:
        data = event.data
        seq = data.get("seq") if isinstance(data, dict) else None
        rec.write("enter", token=lease.token, mid=lease.message_id, g=lease.group_id, seq=seq)

    effects = _Effects(spec, rec)

    fail_rng = random.Random(spec.seed + 1_000_003)

    def failing(lease: Lease) -> None:
        """Raise for a fraction of first attempts (Scenario.fail_fraction): a nack."""
        if lease.attempt == 1 and fail_rng.random() < spec.fail_fraction:
            raise RuntimeError("chaos: this handler fails on purpose")

    def handle(event: Event, lease: Lease) -> None:
        entered(event, lease)
        failing(lease)
        if spec.effect:
            effects.run(lease, pause_for(lease))
            return
        time.sleep(pause_for(lease))
        rec.write("exit", token=lease.token, mid=lease.message_id)

    async def ahandle(event: Event, lease: Lease) -> None:
        entered(event, lease)
        failing(lease)
        if spec.effect:
            await effects.arun(lease, pause_for(lease))
            return
        await asyncio.sleep(pause_for(lease))
        rec.write("exit", token=lease.token, mid=lease.message_id)

    rec.write(
        "start",
        pid=os.getpid(),
        mode=spec.mode,
        offset=spec.clock_offset_s,
        jump_after=spec.clock_jump_after_s,
    )
    options: dict[str, Any] = {
        "concurrency": spec.concurrency,
        "visibility": spec.visibility,
        "idle_backoff": (0.005, 0.1),
        "reconnect_backoff": (0.05, 1.0),
        "shutdown_grace": 10.0,
        "name": spec.name,
    }
    if spec.mode == "async":
        report = asyncio.run(_run_async(spec, rec, ahandle, effects, options))
    else:
        report = _run_sync(spec, rec, handle, effects, options)
    rec.write("stop", report=report, skew=time.time() - real_time())
    rec.close()
    return 0


def _run_sync(
    spec: WorkerSpec,
    rec: Recorder,
    handle: Callable[..., Any],
    effects: _Effects,
    options: dict[str, Any],
) -> dict[str, float]:
    from pgque.core.contract import Transport
    from pgque.core.registry import connect
    from pgque.core.worker import Worker

    with connect(spec.url, queue=spec.queue) as inner:
        transport = cast(Transport, RecordingTransport(inner, rec, extend=spec.extend))
        effects.transport = inner  # the effect settles on the real transport
        worker = Worker(transport, handle, **options)
        return dict(worker.run(install_signal_handlers=True).as_dict())


async def _run_async(
    spec: WorkerSpec,
    rec: Recorder,
    handle: Callable[..., Any],
    effects: _Effects,
    options: dict[str, Any],
) -> dict[str, float]:
    from pgque.core.contract import AsyncTransport
    from pgque.core.registry import connect_async
    from pgque.core.worker import AsyncWorker

    async with connect_async(spec.url, queue=spec.queue) as inner:
        wrapped = AsyncRecordingTransport(inner, rec, extend=spec.extend)
        effects.transport = inner  # the effect settles on the real transport
        worker = AsyncWorker(cast(AsyncTransport, wrapped), handle, **options)
        report = await worker.run(install_signal_handlers=True)
        return dict(report.as_dict())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
