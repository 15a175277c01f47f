"""The peers, measured on the same PostgreSQL server in a database of their own.

procrastinate runs jobs with ``lock=<group>`` (its per-key serialisation: one job of a lock at a
time), PgQueuer runs ungrouped jobs (no per-key order at all). Each uses its own worker loop
with the given concurrency and a no-op task; its schema is installed on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from pgque_bench._common import bench_sql, group_of

PEER_DATABASE = "pgque_bench_peers"


def peer_url(url: str) -> str:
    """Return the URL of the peers' database on the server of *url*; create it if missing."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(bench_sql()["database_exists"], {"name": PEER_DATABASE}).fetchone()
        if row is None or not row[0]:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(PEER_DATABASE)))
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{PEER_DATABASE}"))


def procrastinate_drain(url: str, messages: int, groups: int, concurrency: int) -> dict[str, Any]:
    """Drain *messages* procrastinate jobs locked per group with *concurrency*; the rate."""
    return asyncio.run(_procrastinate(peer_url(url), messages, groups, concurrency))


async def _procrastinate(url: str, messages: int, groups: int, concurrency: int) -> dict[str, Any]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    done = 0
    finished = asyncio.Event()

    @app.task(name="pgque_bench_noop", queue="pgque_bench")
    async def noop() -> None:
        nonlocal done
        done += 1
        if done >= messages:
            finished.set()

    async with app.open_async():
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(bench_sql()["procrastinate_installed"]).fetchone()
        if row is None or not row[0]:
            await app.schema_manager.apply_schema_async()
        per_group: dict[str, int] = {}
        for i in range(messages):
            key = group_of(i, groups)
            per_group[key] = per_group.get(key, 0) + 1
        for key, count in per_group.items():
            await noop.configure(lock=key).batch_defer_async(*([{}] * count))
        start = time.perf_counter()
        worker = asyncio.ensure_future(
            app.run_worker_async(
                queues=["pgque_bench"],
                concurrency=concurrency,
                wait=True,
                install_signal_handlers=False,
                delete_jobs="always",
                fetch_job_polling_interval=0.05,
            )
        )
        waiter = asyncio.ensure_future(finished.wait())
        await asyncio.wait({waiter, worker}, timeout=900, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        seconds = time.perf_counter() - start
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
        seconds = time.perf_counter() - start
    return {"messages": done, "seconds": seconds, "rate": done / seconds}


def pgqueuer_drain(url: str, messages: int, concurrency: int) -> dict[str, Any]:
    """Drain *messages* ungrouped PgQueuer jobs (batch 10, *concurrency* tasks); the rate."""
    return asyncio.run(_pgqueuer(peer_url(url), messages, concurrency))


async def _pgqueuer(url: str, messages: int, concurrency: int) -> dict[str, Any]:
    from pgqueuer import QueueManager
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.models import Job
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    # One queue manager per worker, each on its own connection (PgQueuer's defaults otherwise).
    conns = [
        await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(concurrency)
    ]
    try:
        queries = [Queries(PsycopgDriver(conn)) for conn in conns]
        if not await queries[0].has_table("pgqueuer"):
            await queries[0].install()
        await queries[0].clear_queue()
        for start in range(0, messages, 1_000):
            size = min(1_000, messages - start)
            payloads: list[bytes | None] = [None] * size
            await queries[0].enqueue(["pgque_bench_noop"] * size, payloads, [0] * size)
        managers = [QueueManager(q) for q in queries]
        done = 0

        def register(manager: QueueManager) -> None:
            @manager.entrypoint("pgque_bench_noop")
            async def noop(job: Job) -> None:
                nonlocal done
                done += 1
                if done >= messages:
                    for each in managers:
                        each.shutdown.set()

        for manager in managers:
            register(manager)
        start_t = time.perf_counter()
        # Continuous mode, stopped by the last job: drain mode waits out its dequeue timeout.
        runs = (
            m.run(mode=QueueExecutionMode.continuous, dequeue_timeout=timedelta(seconds=1))
            for m in managers
        )
        await asyncio.wait_for(asyncio.gather(*runs), timeout=900)
        seconds = time.perf_counter() - start_t
    finally:
        for conn in conns:
            await conn.close()
    return {"messages": done, "seconds": seconds, "rate": done / seconds}
