"""The AsyncWorker on PostgreSQL: its connections are terminated mid-run
(pg_terminate_backend), and every message is still processed, in order per group, each ack
taking effect once."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgque.core import AsyncWorker, Event, Lease, Settlement, SettleResult
from pgque.postgres_async import AsyncPostgresTransport

pytestmark = pytest.mark.timeout(60)


class _AckRecorder:
    """Wrap a transport and remember every ack that took effect."""

    def __init__(self, inner: AsyncPostgresTransport) -> None:
        self.inner = inner
        self.acked: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def ack(self, lease: Lease) -> bool:
        done = await self.inner.ack(lease)
        if done:
            self.acked.append(lease.message_id)
        return done

    async def settle_and_claim(
        self, settlements: Sequence[Settlement], n: int, *args: Any, **kwargs: Any
    ) -> SettleResult:
        """The worker's fused call: the acks in it that took effect are remembered too."""
        result = await self.inner.settle_and_claim(settlements, n, *args, **kwargs)
        self.acked.extend(
            item.lease.message_id
            for item, done in zip(settlements, result.settled, strict=True)
            if done and item.outcome == "ack"
        )
        return result


def _kill(url: str, application: str, every: float, rounds: int, stop: threading.Event) -> int:
    killed = 0
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(rounds):
            if stop.wait(every):
                break
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                [application],
            ).fetchall()
            killed += sum(1 for (ok,) in rows if ok)
    return killed


@pytest.mark.asyncio
async def test_async_worker_survives_terminated_backends(postgres_url: str) -> None:
    application = f"pgque_aw_{uuid.uuid4().hex[:12]}"
    queue = f"t_{uuid.uuid4().hex[:24]}"
    groups, per_group = 12, 8
    publisher = await AsyncPostgresTransport.from_dsn(postgres_url, queue=queue, max_size=1)
    await publisher.publish_many(
        [
            (f"g{g:02d}", Event(kind="k", data={"i": i}))
            for i in range(per_group)
            for g in range(groups)
        ]
    )
    dsn = make_conninfo(postgres_url, application_name=application)
    transport = await AsyncPostgresTransport.from_dsn(dsn, queue=queue, max_size=4, timeout=10)
    recorder = _AckRecorder(transport)
    handled: dict[str, list[int]] = defaultdict(list)

    async def handler(event: Event, lease: Lease) -> None:
        await asyncio.sleep(0.02)
        handled[lease.group_id].append(event.data["i"])  # type: ignore[arg-type, call-overload, index]

    stop = threading.Event()
    killer = asyncio.ensure_future(
        asyncio.to_thread(_kill, postgres_url, application, 0.1, 10, stop)
    )
    worker = AsyncWorker(
        recorder,
        handler,
        concurrency=3,
        visibility=1.0,
        idle_backoff=(0.01, 0.1),
        reconnect_backoff=(0.02, 0.2),
    )
    try:
        report = await worker.run(stop_when_idle=True, install_signal_handlers=False)
    finally:
        stop.set()
        killed = await killer
        await transport.close()
    try:
        print(f"killed {killed} backends; {report}")
        assert killed > 0
        assert report.errors > 0  # the terminations were felt ...
        # ... and yet nothing was lost, and no ack took effect twice
        assert sorted(recorder.acked) == sorted(set(recorder.acked))
        assert len(recorder.acked) == groups * per_group
        for seq in handled.values():
            assert sorted(set(seq)) == list(range(per_group))
            firsts = list(dict.fromkeys(seq))
            assert firsts == sorted(firsts)  # redelivery repeats, never skips ahead
        stats = await publisher.stats()
        assert (stats.messages, stats.groups) == (0, 0)
    finally:
        await publisher.purge()
        await publisher.close()
