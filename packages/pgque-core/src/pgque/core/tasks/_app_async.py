"""The asyncio task app, :class:`AsyncApp`: tasks registered on a transport, deferred to it,
and run by its worker."""

# This file is the source of its blocking twin, _app_sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from types import TracebackType
from typing import Any

from typing_extensions import Self

from pgque.core.contract import AsyncSettleTransaction, AsyncSupportsSettleIn, AsyncTransport
from pgque.core.errors import InvalidInput, Unsupported
from pgque.core.models import Event, Lease
from pgque.core.partition_base import AsyncPartitionAdapterBase, adapter_for_async
from pgque.core.registry import connect_async
from pgque.core.routing import Router
from pgque.core.tasks._spec import GroupRule, KeyRule, TaskSpec, build_spec, delay_of
from pgque.core.tasks._task import Task
from pgque.core.worker import AsyncWorker, RetryPolicy, StopWorker

__all__ = ["AsyncApp"]


class AsyncApp:
    """Tasks on one queue (asyncio API): ``@app.task`` registers a function,
    ``task.defer_async(...)`` publishes it, :meth:`async_worker` runs them.

    *transport* is an :class:`~pgque.core.AsyncTransport`, or a URL the app connects to on
    first use (``connect_async(url, queue=queue, **options)``). The app is itself a handler
    (``pgque worker module:app`` runs its tasks), routing by ``event.kind`` with a
    :class:`~pgque.core.Router`: a kind no task has is dead-lettered with a reason naming the
    kinds it knows (``unknown="retry"`` retries it instead, for a rolling deploy). See
    docs/tasks.md.
    """

    is_async = True  # async-only
    # sync: is_async = False

    def __init__(
        self,
        transport: AsyncTransport | str,
        *,
        queue: str | None = None,
        unknown: str = "dead_letter",
        **options: Any,
    ) -> None:
        if isinstance(transport, str):
            self.url: str | None = transport
            self._transport: AsyncTransport | None = None
        elif isinstance(transport, AsyncTransport):
            if queue is not None or options:
                raise InvalidInput("queue and connection options go with a URL, not a transport")
            self.url = None
            self._transport = transport
        else:
            raise InvalidInput(f"transport must be an AsyncTransport or a URL, not {transport!r}")
        self.queue = queue
        self._options = options
        self._router = Router(unknown=unknown)  # type: ignore[arg-type]
        self._tasks: dict[str, Task] = {}
        self._adapter: AsyncPartitionAdapterBase | None = None

    @property
    def transport(self) -> AsyncTransport:
        """The app's transport (connected on first use when the app was given a URL)."""
        if self._transport is None:
            assert self.url is not None
            options = dict(self._options)
            if self.queue is not None:
                options["queue"] = self.queue
            self._transport = connect_async(self.url, **options)
        return self._transport

    @property
    def tasks(self) -> dict[str, Task]:
        """The registered tasks by kind."""
        return dict(self._tasks)

    @property
    def router(self) -> Router:
        """The handler that runs the tasks: a Router by ``event.kind``."""
        return self._router

    def task(
        self,
        *,
        group: GroupRule,
        kind: str | None = None,
        fairness_key: KeyRule = None,
        priority: int = 0,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
    ) -> Callable[[Callable[..., Any]], Task]:
        """Return a decorator registering a function as a task.

        *group* (required): the group of each call, a template over the arguments
        (``"order-{order_id}"``) or a callable taking them (``lambda order_id, **_:
        f"order-{order_id}"``); calls of one group run one at a time, in order, and groups in
        parallel. *kind*: the messages' ``event.kind`` (default ``module.qualname``).
        *fairness_key*: a template or callable like *group* (docs/fairness.md). *priority*:
        0-4. *retry*: the task's own backoff; *max_attempts*: its own limit (at most the
        transport's: the message is then dead-lettered). The function may take ``lease`` and
        ``event`` parameters (the worker passes them); its other parameters are its
        arguments, checked by their annotations (none: any JSON value). Raises InvalidInput
        for a function or option that cannot work, or a kind already taken.
        """

        def register(target: Callable[..., Any]) -> Task:
            spec = build_spec(
                target,
                kind=kind,
                group=group,
                fairness_key=fairness_key,
                priority=priority,
                retry=retry,
                max_attempts=max_attempts,
            )
            if spec.kind in self._tasks:
                raise InvalidInput(f"kind {spec.kind!r} already has a task")
            if spec.in_transaction and spec.is_async != self.is_async:
                raise InvalidInput(
                    f"task {spec.kind}: a task taking connection runs in the app's transaction: "
                    "on an AsyncApp it is async def, on an App a plain def"
                )
            self._router.on(spec.kind)(spec.handler(self._settle_in))
            registered = Task(spec, self)
            self._tasks[spec.kind] = registered
            return registered

        return register

    async def _defer(
        self,
        spec: TaskSpec,
        values: list[Mapping[str, Any]],
        delay: float,
        at: datetime | float | None,
        priority: int | None,
        dedup: tuple[str, float] | None = None,
    ) -> list[int]:
        """Check every call, then publish them: one ``publish_many`` per fairness key; a call
        with *dedup* (key, ttl) through the transport's dedup window."""
        wait = delay_of(delay, at, time.time())
        messages = spec.messages(values)
        level = spec.priority if priority is None else priority
        if dedup is not None:
            group, event, key = messages[0]
            if wait or key is not None:
                raise InvalidInput(
                    f"task {spec.kind}: a deduplicated defer is published at once, without a "
                    "fairness key: dedup_key does not go with delay, at or fairness_key"
                )
            if self._adapter is None:
                self._adapter = adapter_for_async(self.transport)
            message_id, _ = await self._adapter.publish(group, event, level, dedup)
            return [message_id]
        ids: list[int | None] = [None] * len(messages)
        by_key: dict[str | None, list[int]] = {}
        for index, (_, _, key) in enumerate(messages):
            by_key.setdefault(key, []).append(index)
        for key, indices in by_key.items():
            items = [(messages[i][0], messages[i][1]) for i in indices]
            published = await self.transport.publish_many(
                items, priority=level, delay=wait, fairness_key=key
            )
            for index, message_id in zip(indices, published, strict=True):
                ids[index] = message_id
        return [i for i in ids if i is not None]

    def _settle_in(self, lease: Lease) -> AbstractAsyncContextManager[AsyncSettleTransaction]:
        """The transaction a task taking ``connection`` runs in (docs/transactions.md); a
        backend without ``settle_in`` stops the worker (no retry would help)."""
        transport = self.transport
        if not isinstance(transport, AsyncSupportsSettleIn) or not (
            transport.capabilities.settle_in
        ):
            raise StopWorker(
                Unsupported(
                    f"a task taking connection needs settle_in, which {transport!r} does not "
                    "offer (Capabilities.settle_in; PostgreSQL has it)"
                )
            )
        return transport.settle_in(lease)

    def async_worker(self, **options: Any) -> AsyncWorker:
        """An :class:`~pgque.core.AsyncWorker` running this app's tasks on its transport
        (*options*: the worker's)."""
        return AsyncWorker(self.transport, self._router, **options)

    def __call__(self, event: Event, lease: Lease) -> Any:
        """Run the task of ``event.kind`` (the app is a handler: ``pgque worker module:app``)."""
        return self._router(event, lease)

    @property
    def __pgque_async__(self) -> bool:
        """Whether calling the app returns a coroutine (a task is ``async def``)."""
        return self._router.__pgque_async__

    async def close(self) -> None:
        """Close the transport if the app opened it (from a URL)."""
        if self.url is not None and self._transport is not None:
            await self._transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        where = self.url if self.url is not None else repr(self._transport)
        return f"AsyncApp({where!r}, tasks={list(self._tasks)!r})"
