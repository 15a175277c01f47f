"""Tasks against the transport API: what ``@app.task`` costs (issue 32's targets).

- :func:`task_worker_drain`: an :class:`~pgque.core.AsyncApp`'s worker drains a backlog of
  deferred no-op tasks, the same shape as the raw ``AsyncWorker`` case (``worker-async-8``):
  the difference is the routing by kind and the arguments checked by pydantic per run.
- :func:`defer_many`: ``defer_many_async`` in batches, beside :func:`publish_built`:
  ``publish_many`` of the same messages, each Event built in the timed loop as a producer
  without tasks builds it (``publish-pg-async-batch`` reuses one Event object for the whole
  backlog, a best case no producer of distinct messages has). The difference is the
  arguments checked and the group computed per call.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pgque.core import AsyncApp, Event
from pgque.core.tasks import Task
from pgque_bench._common import fresh_queue, group_of
from pgque_bench._systems import (
    _CHUNK,
    System,
    _check_drained,
    _cleanup,
    _result,
    open_async,
)

__all__ = ["task_worker_drain", "defer_many", "publish_built"]


def _app(system: System, queue: str, connections: int) -> tuple[AsyncApp, Task]:
    app = AsyncApp(open_async(system, queue, connections))

    @app.task(group="{g}", kind="bench_task")
    async def bench_task(g: str, n: int) -> None:
        """The no-op task: its arguments are checked, then nothing happens."""

    return app, bench_task


def _calls(first: int, stop: int, groups: int) -> list[dict[str, Any]]:
    return [{"g": group_of(i, groups), "n": 1} for i in range(first, stop)]


async def _defer_all(task: Task, messages: int, groups: int, batch: int) -> None:
    for first in range(0, messages, batch):
        await task.defer_many_async(_calls(first, min(messages, first + batch), groups))


def task_worker_drain(
    system: System, concurrency: int, groups: int, per_group: int
) -> dict[str, Any]:
    """Drain *groups* x *per_group* deferred no-op tasks with ``app.async_worker``; the clock
    starts after the transport connected and stops when ``run(stop_when_idle=True)``
    returns (every task must have been acked)."""
    if not system.is_async:
        raise ValueError("the tasks cases run on the asyncio API")
    queue = fresh_queue()
    messages = groups * per_group

    async def run() -> tuple[int, float]:
        app, task = _app(system, queue, concurrency + 1)
        try:
            await _defer_all(task, messages, groups, _CHUNK)
            worker = app.async_worker(concurrency=concurrency)
            start = time.perf_counter()
            report = await worker.run(stop_when_idle=True, install_signal_handlers=False)
            return report.acked, time.perf_counter() - start
        finally:
            await app.close()

    try:
        acked, seconds = asyncio.run(run())
    finally:
        _cleanup(system, queue)
    _check_drained(acked, messages, f"{system.name} task worker")
    return _result(acked, seconds)


def defer_many(system: System, messages: int, groups: int, batch: int) -> dict[str, Any]:
    """Defer *messages* no-op tasks with ``defer_many_async`` in lists of *batch*; the rate."""
    if not system.is_async:
        raise ValueError("the tasks cases run on the asyncio API")
    queue = fresh_queue()

    async def run() -> float:
        app, task = _app(system, queue, 1)
        try:
            await app.transport.stats()
            start = time.perf_counter()
            await _defer_all(task, messages, groups, batch)
            seconds = time.perf_counter() - start
            _check_drained((await app.transport.stats()).messages, messages, "defer (stored)")
            return seconds
        finally:
            await app.close()

    try:
        seconds = asyncio.run(run())
    finally:
        _cleanup(system, queue)
    return _result(messages, seconds)


def publish_built(system: System, messages: int, groups: int, batch: int) -> dict[str, Any]:
    """Publish the messages :func:`defer_many` publishes with ``publish_many`` in lists of
    *batch*, building each Event (kind and arguments as the task's) in the timed loop."""
    if not system.is_async:
        raise ValueError("the tasks cases run on the asyncio API")
    queue = fresh_queue()

    async def run() -> float:
        transport = open_async(system, queue)
        try:
            await transport.stats()
            start = time.perf_counter()
            for first in range(0, messages, batch):
                items = [
                    (call["g"], Event(kind="bench_task", data=call))
                    for call in _calls(first, min(messages, first + batch), groups)
                ]
                await transport.publish_many(items)
            seconds = time.perf_counter() - start
            _check_drained((await transport.stats()).messages, messages, "publish (stored)")
            return seconds
        finally:
            await transport.close()

    try:
        seconds = asyncio.run(run())
    finally:
        _cleanup(system, queue)
    return _result(messages, seconds)
