"""The peers, measured on the same PostgreSQL server in a database of their own.

procrastinate runs jobs with ``lock=<group>`` (its per-key serialisation: one job of a lock at a
time). PgQueuer runs **ungrouped** jobs (it has no per-key order at all), with either of its
drivers (asyncpg or psycopg). Each uses its own worker loop and a no-op task; its schema is
installed on first use. Every drain opens its connections (or pool) first and starts the clock
when the peer's worker loop is called, as pgque's worker cases do; the peer's own start-up
inside that call is therefore timed, and measured alone on an empty queue by the ``*_startup``
cases so the report can show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from pgque_bench._common import bench_sql, group_of

if TYPE_CHECKING:
    import procrastinate

_ENTRYPOINT = "pgque_bench_noop"
_PROCRASTINATE_QUEUE = "pgque_bench"
_CHUNK = 1_000


def peer_database(url: str) -> str:
    """Return the peers' database name for *url*: its own database name plus ``_peers``, so
    two runs on different databases of one server never share the peers' tables."""
    name = urlsplit(url).path.lstrip("/") or "postgres"
    return f"{name}_peers"


def peer_url(url: str) -> str:
    """Return the URL of the peers' database on the server of *url*; create it if missing."""
    name = peer_database(url)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(bench_sql()["database_exists"], {"name": name}).fetchone()
        if row is None or not row[0]:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


# -- procrastinate -------------------------------------------------------------------------


def procrastinate_drain(
    url: str,
    groups: int,
    per_group: int,
    concurrency: int | None,
    polling: float | None = None,
    sleep: float = 0.0,
    pool: int | None = None,
) -> dict[str, Any]:
    """Drain *groups* x *per_group* procrastinate jobs, each with ``lock=<group>``.

    *concurrency* None: the worker's defaults (concurrency 1, the connector's default pool).
    Otherwise that concurrency and a pool of *pool* connections (default ``concurrency +
    1``). *polling*: the worker's ``fetch_job_polling_interval`` (None: its default).
    *sleep*: seconds each job awaits (0: a no-op).
    """
    return asyncio.run(
        _procrastinate(peer_url(url), groups, per_group, concurrency, False, polling, sleep, pool)
    )


def procrastinate_startup(url: str, concurrency: int | None) -> dict[str, Any]:
    """Time procrastinate's worker from its start to its return on an empty queue."""
    return asyncio.run(_procrastinate(peer_url(url), 0, 0, concurrency, True))


def _procrastinate_app(
    url: str, concurrency: int | None, size: int | None = None
) -> procrastinate.App:
    import procrastinate

    pool: dict[str, Any] = {}
    if concurrency is not None:
        size = size or concurrency + 1
        pool = {"min_size": size, "max_size": size}
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url, **pool))


async def _procrastinate(
    url: str,
    groups: int,
    per_group: int,
    concurrency: int | None,
    startup: bool,
    polling: float | None = None,
    sleep: float = 0.0,
    pool: int | None = None,
) -> dict[str, Any]:
    app = _procrastinate_app(url, concurrency, pool)
    messages = groups * per_group
    done = 0
    finished = asyncio.Event()

    @app.task(name=_ENTRYPOINT, queue=_PROCRASTINATE_QUEUE)
    async def noop() -> None:
        nonlocal done
        if sleep:
            await asyncio.sleep(sleep)
        done += 1
        if done >= messages:
            finished.set()

    options: dict[str, Any] = {
        "queues": [_PROCRASTINATE_QUEUE],
        "install_signal_handlers": False,
        "delete_jobs": "always",
    }
    if concurrency is not None:
        options["concurrency"] = concurrency
    if polling is not None:
        options["fetch_job_polling_interval"] = polling
    async with app.open_async():
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(bench_sql()["procrastinate_installed"]).fetchone()
            if row is None or not row[0]:
                await app.schema_manager.apply_schema_async()
            conn.execute(bench_sql()["procrastinate_clear"], {"queue": _PROCRASTINATE_QUEUE})
        if startup:
            start = time.perf_counter()
            await asyncio.wait_for(app.run_worker_async(wait=False, **options), 120)
            return {"seconds": time.perf_counter() - start}
        for g in range(groups):
            await noop.configure(lock=group_of(g, groups)).batch_defer_async(*([{}] * per_group))
        start = time.perf_counter()
        worker = asyncio.ensure_future(app.run_worker_async(wait=True, **options))
        waiter = asyncio.ensure_future(finished.wait())
        await asyncio.wait({waiter, worker}, timeout=900, return_when=asyncio.FIRST_COMPLETED)
        seconds = time.perf_counter() - start
        waiter.cancel()
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
    if done != messages:
        raise RuntimeError(f"procrastinate ran {done:,} of {messages:,} jobs")
    return {"messages": done, "seconds": seconds, "rate": done / seconds}


# -- PgQueuer ------------------------------------------------------------------------------


async def _pgqueuer_connect(url: str, driver: str) -> tuple[Any, Any]:
    """Return (PgQueuer driver, connection) for *driver* "asyncpg" or "psycopg"."""
    from pgqueuer.db import AsyncpgDriver, PsycopgDriver

    if driver == "asyncpg":
        import asyncpg

        conn: Any = await asyncpg.connect(url)
        return AsyncpgDriver(conn), conn
    if driver == "psycopg":
        aconn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        return PsycopgDriver(aconn), aconn
    raise ValueError(f"unknown PgQueuer driver {driver!r}")


async def _pgqueuer_setup(url: str, driver: str) -> tuple[Any, Any]:
    from pgqueuer.queries import Queries

    db, conn = await _pgqueuer_connect(url, driver)
    queries = Queries(db)
    if not await queries.has_table("pgqueuer"):
        await queries.install()
    await queries.clear_queue()
    return queries, conn


async def _enqueue(queries: Any, messages: int, batch: int) -> None:
    for start in range(0, messages, batch):
        size = min(batch, messages - start)
        payloads: list[bytes | None] = [None] * size
        await queries.enqueue([_ENTRYPOINT] * size, payloads, [0] * size)


async def _left(queries: Any) -> int:
    """Return how many of the harness's jobs are still in PgQueuer's queue (any status)."""
    rows = await queries.queue_size()
    return sum(row.count for row in rows if row.entrypoint == _ENTRYPOINT)


def pgqueuer_drain(
    url: str,
    driver: str,
    managers: int,
    batch: int | None,
    groups: int,
    per_group: int,
    cap: int | None = None,
    sleep: float = 0.0,
) -> dict[str, Any]:
    """Drain ``groups * per_group`` ungrouped PgQueuer jobs with *managers* QueueManagers.

    Each manager has its own connection of *driver*; *batch* None keeps ``run()``'s default
    batch size; *cap* is each manager's ``max_concurrent_tasks`` (None: unbounded, its
    default; PgQueuer requires at least twice the batch). *sleep*: seconds each job awaits
    (0: a no-op). Jobs carry no group: PgQueuer has no per-key order.
    """
    return asyncio.run(
        _pgqueuer(peer_url(url), driver, managers, batch, groups * per_group, cap, sleep)
    )


def pgqueuer_startup(url: str, driver: str, managers: int, batch: int | None) -> dict[str, Any]:
    """Time PgQueuer's managers from ``run(mode=drain)`` to their return on an empty queue."""
    return asyncio.run(_pgqueuer(peer_url(url), driver, managers, batch, 0))


async def _pgqueuer(
    url: str,
    driver: str,
    managers: int,
    batch: int | None,
    messages: int,
    cap: int | None = None,
    sleep: float = 0.0,
) -> dict[str, Any]:
    from pgqueuer import QueueManager
    from pgqueuer.models import Job
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    setup, setup_conn = await _pgqueuer_setup(url, driver)
    links = [await _pgqueuer_connect(url, driver) for _ in range(managers)]
    try:
        await _enqueue(setup, messages, _CHUNK)
        qms = [QueueManager(Queries(db)) for db, _conn in links]
        done = 0

        def register(manager: QueueManager) -> None:
            @manager.entrypoint(_ENTRYPOINT)
            async def noop(job: Job) -> None:
                nonlocal done
                if sleep:
                    await asyncio.sleep(sleep)
                done += 1
                if done >= messages:
                    for each in qms:
                        each.shutdown.set()

        for manager in qms:
            register(manager)
        options: dict[str, Any] = {} if batch is None else {"batch_size": batch}
        if cap is not None:
            options["max_concurrent_tasks"] = cap
        if messages == 0:
            options["mode"] = QueueExecutionMode.drain
        else:
            # Continuous mode, stopped by the last job: drain mode waits out its dequeue
            # timeout after every batch that leaves tasks running.
            options.update(mode=QueueExecutionMode.continuous, dequeue_timeout=timedelta(seconds=1))
        start = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(m.run(**options) for m in qms)), timeout=900)
        seconds = time.perf_counter() - start
        left = await _left(setup)
    finally:
        for _db, conn in links:
            await conn.close()
        await setup.clear_queue()
        await setup_conn.close()
    if messages == 0:
        return {"seconds": seconds}
    if done != messages or left:
        raise RuntimeError(f"PgQueuer ran {done:,} of {messages:,} jobs ({left} left queued)")
    return {"messages": done, "seconds": seconds, "rate": done / seconds}


def pgqueuer_publish(url: str, driver: str, messages: int, batch: int) -> dict[str, Any]:
    """Enqueue *messages* PgQueuer jobs with lists of *batch*; the rate."""
    return asyncio.run(_pgqueuer_publish(peer_url(url), driver, messages, batch))


async def _pgqueuer_publish(url: str, driver: str, messages: int, batch: int) -> dict[str, Any]:
    queries, conn = await _pgqueuer_setup(url, driver)
    try:
        start = time.perf_counter()
        await _enqueue(queries, messages, batch)
        seconds = time.perf_counter() - start
        stored = await _left(queries)
    finally:
        await queries.clear_queue()
        await conn.close()
    if stored != messages:
        raise RuntimeError(f"PgQueuer stored {stored:,} of {messages:,} jobs")
    return {"messages": messages, "seconds": seconds, "rate": messages / seconds}
