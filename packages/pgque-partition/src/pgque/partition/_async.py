"""The keyed publisher and the partition consumer (asyncio API): the I/O around the tiers."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pgque.core.contract import AsyncTransport
from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import Event, Lease
from pgque.core.partition_base import AsyncPartitionAdapterBase
from pgque.core.tracing import traced_publish
from pgque.core.validation import check_priority
from pgque.core.worker import AsyncWorker, Retry, StopWorker, WorkerReport, wants_lease
from pgque.partition._adapters import partition_backend_async
from pgque.partition._consuming import ConsumerCounts, FailurePolicy, KeyContext, check_policy
from pgque.partition._tiers import (
    DEFAULT_DEDUP_TTL,
    KEY_HEADER,
    Exclusive,
    Ordered,
    Tier,
    check_dedup,
    check_key,
    check_slot_count,
    check_tier,
    group_for,
    keyed_event,
    positive_seconds,
)

__all__ = ["AsyncKeyedPublisher", "AsyncPartitionConsumer"]


async def _check_slots(backend: AsyncPartitionAdapterBase, tier: Tier) -> None:
    if isinstance(tier, Ordered) and tier.slots is not None:
        check_slot_count(backend.queue, tier.slots, await backend.ensure_slots(tier.slots))


class AsyncKeyedPublisher:
    """Publish events under partition keys, each to the group its *tier* (the same as the
    queue's consumers') gives it (asyncio API); *dedup_ttl*: the window of a send with a
    ``dedup_key`` and no TTL. Raises InvalidInput for a bad tier, priority or TTL."""

    def __init__(
        self,
        transport: AsyncTransport,
        *,
        tier: Tier | None = None,
        priority: int = 0,
        dedup_ttl: float | None = None,
    ) -> None:
        self._transport = transport
        self._tier = check_tier(tier)
        self._priority = check_priority(priority)
        ttl = DEFAULT_DEDUP_TTL if dedup_ttl is None else dedup_ttl
        self._ttl = positive_seconds(ttl, "dedup_ttl")
        self._backend = partition_backend_async(transport)
        self._slots_checked = False

    def __repr__(self) -> str:
        return f"AsyncKeyedPublisher(queue={self._transport.queue!r}, tier={self._tier!r})"

    @property
    def tier(self) -> Tier:
        """The tier events are published under."""
        return self._tier

    @property
    def queue(self) -> str:
        """The transport's queue (the one events are published to)."""
        return self._transport.queue

    @property
    def backend(self) -> AsyncPartitionAdapterBase:
        """The transport's partition adapter (memory, PostgreSQL, Redis or generic)."""
        return self._backend

    def group_for(self, partition_key: str | None, event_id: str = "") -> str:
        """Return the group an event of *partition_key* goes to (Exclusive: per event id)."""
        return group_for(self._tier, check_key(partition_key), event_id)

    async def check_slots(self) -> None:
        """Persist this tier's slot count, or raise SlotCountMismatch for another one."""
        if not self._slots_checked:
            await _check_slots(self._backend, self._tier)
            self._slots_checked = True

    @traced_publish
    async def send(
        self,
        kind: str,
        data: Any = None,
        *,
        partition_key: str | None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
        headers: Mapping[str, str] | None = None,
        priority: int | None = None,
        event_id: str | None = None,
    ) -> tuple[int, bool]:
        """Publish an event of *kind* with *data* under *partition_key*; return ``(message_id,
        deduped)``: a repeat of *dedup_key* within *dedup_ttl* seconds of its first send
        appends nothing. Raises InvalidInput for a bad argument, SlotCountMismatch for another
        slot count, ConfigurationError for dedup on a transport without it, ConnectionLost."""
        key = check_key(partition_key)
        dedup = check_dedup(dedup_key, dedup_ttl, self._ttl)
        prio = self._priority if priority is None else check_priority(priority)
        event = keyed_event(kind, data, key, headers, event_id)
        await self.check_slots()
        return await self._backend.publish(group_for(self._tier, key, event.id), event, prio, dedup)


class AsyncPartitionConsumer:
    """Run *handler* (taking the event, or ``(event, context)``) on a partitioned queue under its
    tier and failure policy, on an :class:`~pgque.core.worker.AsyncWorker` made with
    *worker_options* (``idle_backoff`` defaults to ``(0.05, 1.0)``; asyncio API).
    It may be ``async def`` or a plain function (called on the event loop).  # async-only
    *lock_pool*: a psycopg pool for PostgreSQL's key locks. Raises InvalidInput for a bad option
    or handler, ConfigurationError for a policy or key locks the transport cannot honour."""

    def __init__(
        self,
        transport: AsyncTransport,
        handler: Callable[..., Any],
        *,
        tier: Tier | None = None,
        policy: FailurePolicy = "skip",
        lock_pool: Any = None,
        **worker_options: Any,
    ) -> None:
        self._transport = transport
        self._tier = check_tier(tier)
        self._policy = check_policy(self._tier, policy, transport)
        self._handler = handler
        self._with_context = wants_lease(handler)  # a context where a worker gives the lease
        self._backend = partition_backend_async(transport, lock_pool=lock_pool)
        self.counts = ConsumerCounts()
        worker_options.setdefault("idle_backoff", (0.05, 1.0))
        self._worker = AsyncWorker(transport, self._handle, **worker_options)
        if isinstance(self._tier, Exclusive):
            if not self._backend.key_locks:
                kind = type(transport).__name__
                raise InvalidInput(f"the Exclusive tier needs a key lock; {kind} has none")
            self._backend.check_concurrency(self._worker.options.concurrency)
            self._backend.claim_lock_session(self)

    def __repr__(self) -> str:
        return f"AsyncPartitionConsumer(queue={self._transport.queue!r}, tier={self._tier!r})"

    @property
    def tier(self) -> Tier:
        """The tier this consumer runs under."""
        return self._tier

    @property
    def policy(self) -> FailurePolicy:
        """The failure policy (``skip`` or ``pause``)."""
        return self._policy

    @property
    def worker(self) -> AsyncWorker:
        """The worker underneath (its options, ``stop()``)."""
        return self._worker

    async def run(
        self, *, stop_when_idle: bool = False, install_signal_handlers: bool = False
    ) -> WorkerReport:
        """Handle events until stopped (or idle, with *stop_when_idle*); return the report.
        Raises SlotCountMismatch for a queue of another slot count, or what the worker raises."""
        await _check_slots(self._backend, self._tier)
        try:
            return await self._worker.run(
                stop_when_idle=stop_when_idle, install_signal_handlers=install_signal_handlers
            )
        finally:
            # A finished consumer no longer uses its connection's lock session.
            self._backend.free_lock_session(self)

    def stop(self, graceful: bool = True) -> None:
        """Ask :meth:`run` to stop (see the worker's ``stop``)."""
        self._worker.stop(graceful)

    async def release_key(self, partition_key: str | None, *, drop_head: bool = True) -> bool:
        """Dead-letter (or, ``drop_head=False``, retry) the failed event by which ``pause``
        holds *partition_key*; False if it holds none. Raises InvalidInput under Exclusive."""
        if not isinstance(self._tier, Ordered):
            raise InvalidInput("release_key applies to the Ordered tier")
        group = group_for(self._tier, check_key(partition_key), "")
        return await self._transport.unblock(group, drop_head=drop_head)

    async def _call(self, event: Event, context: KeyContext) -> None:
        self.counts.add("ran")
        args = (event, context) if self._with_context else (event,)
        result = self._handler(*args)  # async-only
        if inspect.isawaitable(result):  # async-only
            await result  # async-only
        # sync: self._handler(*args)

    async def _handle(self, event: Event, lease: Lease) -> None:
        key = event.headers.get(KEY_HEADER)
        tier = self._tier
        if not isinstance(tier, Exclusive) or key is None:
            await self._call(event, KeyContext(key, lease))
            return
        entered = False
        try:
            async with self._backend.key_lock(key, tier.lock_ttl) as grant:
                entered = True
                if grant is None:
                    self.counts.add("dropped" if tier.contention == "drop" else "deferred")
                    if tier.contention == "defer":
                        raise Retry(tier.defer_delay)
                    return
                await self._call(event, KeyContext(key, lease, grant.epoch, grant.connection))
        except ConfigurationError as exc:
            if entered:
                raise  # the handler's own error
            # The lock layer cannot work as configured: not this message's failure (retrying
            # would only spend its attempts), so the worker stops with the error.
            raise StopWorker(exc) from exc
