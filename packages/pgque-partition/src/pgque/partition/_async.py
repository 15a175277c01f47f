"""The keyed publisher and the partition consumer (asyncio API)."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pgque.core.contract import AsyncTransport
from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import Event, Lease
from pgque.core.tracing import traced_publish
from pgque.core.validation import check_priority
from pgque.core.worker import (
    AsyncWorker,
    Retry,
    RetryPolicy,
    StopWorker,
    WorkerHooks,
    WorkerReport,
)
from pgque.partition._backends_async import AsyncPartitionBackend, partition_backend
from pgque.partition._common import (
    KEY_HEADER,
    ConsumerCounts,
    Exclusive,
    FailurePolicy,
    KeyContext,
    Ordered,
    SlotCountMismatch,
    Tier,
    check_dedup,
    check_key,
    check_policy,
    check_tier,
    group_for,
)

__all__ = ["AsyncKeyedPublisher", "AsyncPartitionConsumer"]


async def _check_slots(backend: AsyncPartitionBackend, tier: Tier) -> None:
    """Persist the tier's slot count on first use; refuse a queue set up with another."""
    if not isinstance(tier, Ordered) or tier.slots is None:
        return
    in_force = await backend.ensure_slots(tier.slots)
    if in_force != tier.slots:
        raise SlotCountMismatch(
            f"queue {backend.queue!r} hashes keys to {in_force} slots, not {tier.slots}: "
            "changing N would move keys between slots and break their order. Use "
            f"Ordered(slots={in_force}), or resize by draining the queue and cutting over "
            "(docs/partition.md)"
        )


class AsyncKeyedPublisher:
    """Publish events under a partition key to *transport*'s queue (asyncio API).

    *tier* decides the group of each event (see :func:`~pgque.partition.group_for`); consumers
    of the queue must use the same tier. *dedup_ttl* is the window of a send that names a
    ``dedup_key`` but no TTL. Raises InvalidInput for a bad tier, priority or TTL.
    """

    def __init__(
        self,
        transport: AsyncTransport,
        *,
        tier: Tier | None = None,
        priority: int = 0,
        dedup_ttl: float | None = None,
    ) -> None:
        self._transport = transport
        self._tier = check_tier(Ordered() if tier is None else tier)
        self._priority = check_priority(priority)
        self._default_ttl = None if dedup_ttl is None else check_dedup("x", dedup_ttl)
        self._backend = partition_backend(transport)
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
    def backend(self) -> AsyncPartitionBackend:
        """The backend adapter (memory, PostgreSQL, Redis or generic)."""
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
        """Publish an event of *kind* with *data* under *partition_key*.

        Returns ``(message_id, deduped)``. With *dedup_key*, a repeat of that key within
        *dedup_ttl* seconds (default: the publisher's, else 300) after the first send appends
        nothing and returns the first send's id with ``deduped=True``; the check and the append
        are one atomic step on every backend. The window starts at the first publish and is
        not extended by repeats; the key should name the effect (``migrate:tenant:42:v3``),
        not just the entity. ``partition_key=None`` publishes an event without a key (slot 0,
        or a group of its own; never locked under Exclusive).

        Raises InvalidInput for a bad key, dedup key, TTL, kind, data or priority;
        SlotCountMismatch when the queue uses another slot count; ConfigurationError when the
        transport cannot deduplicate; ConnectionLost or PgqueError when the store fails.
        """
        key = check_key(partition_key)
        if dedup_key is not None and dedup_ttl is None and self._default_ttl is not None:
            dedup_ttl = self._default_ttl[1]
        dedup = check_dedup(dedup_key, dedup_ttl)
        prio = self._priority if priority is None else check_priority(priority)
        all_headers = dict(headers or {})
        if key is not None:
            all_headers[KEY_HEADER] = key
        fields: dict[str, Any] = {"kind": kind, "headers": all_headers}
        if data is not None:
            fields["data"] = data
        if event_id is not None:
            fields["id"] = event_id
        event = Event(**fields)
        await self.check_slots()
        group = group_for(self._tier, key, event.id)
        return await self._backend.publish(group, event, prio, dedup)


def _takes_context(handler: Callable[..., Any]) -> bool:
    """Tell whether *handler* takes ``(event, context)`` rather than ``(event)``."""
    if not callable(handler):
        raise InvalidInput(f"handler must be callable, not {type(handler).__name__}")
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in params if p.kind in kinds]
    if not positional:
        raise InvalidInput("handler must accept the event as its first positional parameter")
    return len(positional) >= 2


class AsyncPartitionConsumer:
    """Run *handler* on a partitioned queue under its tier and failure policy (asyncio API).

    A :class:`~pgque.core.worker.AsyncWorker` claims, renews, retries and settles; this class
    adds what the tier needs around each handler call. *handler* takes the event, or
    ``(event, context)`` with a :class:`KeyContext`.
    It may be ``async def`` or a plain function (called on the event loop).  # async-only
    Returning acks; raising retries per *retry* (a
    :class:`~pgque.core.worker.RetryPolicy`); :class:`~pgque.core.worker.Reject`
    dead-letters at once.

    - :class:`Ordered`: one handler per key (per slot with ``slots=N``), in publish order.
    - :class:`Exclusive`: the handler runs only while this worker holds the event's key lock;
      a held key means ``drop`` (ack unrun, counted) or ``defer`` (retry after the delay).
    - *policy* ``skip``/``pause``: checked against the transport's ``max_attempts`` and
      ``on_exhausted`` (open it with ``**policy_options(policy, n)``).

    *lock_pool* (PostgreSQL, Exclusive): a psycopg pool for the lock transactions, default the
    transport's pool (size it for *concurrency* handlers plus claims and acks).
    Raises InvalidInput for a bad option or handler; ConfigurationError for a policy the tier
    or transport cannot honour, for Exclusive with *concurrency* > 1 on a PostgreSQL
    transport that sits on one injected connection and no *lock_pool* (its handlers would
    share one lock session), for a second Exclusive consumer on such a connection while the
    first exists and has not finished a run, or for a *lock_pool* smaller than *concurrency*.
    A lock layer that fails so while running stops the worker with that ConfigurationError
    (:meth:`run` raises it); the message is released, not counted as a handler failure.
    """

    def __init__(
        self,
        transport: AsyncTransport,
        handler: Callable[..., Any],
        *,
        tier: Tier | None = None,
        policy: FailurePolicy = "skip",
        concurrency: int = 1,
        visibility: float = 30.0,
        retry: RetryPolicy | None = None,
        idle_backoff: tuple[float, float] = (0.05, 1.0),
        hooks: WorkerHooks | None = None,
        name: str | None = None,
        lock_pool: Any = None,
    ) -> None:
        self._transport = transport
        self._tier = check_tier(Ordered() if tier is None else tier)
        self._policy = check_policy(self._tier, policy, transport)
        self._handler = handler
        self._with_context = _takes_context(handler)
        self._backend = partition_backend(transport, lock_pool=lock_pool)
        if isinstance(self._tier, Exclusive) and not self._backend.key_locks:
            raise InvalidInput(
                f"the Exclusive tier needs a key lock; {type(transport).__name__} has none"
            )
        if isinstance(self._tier, Exclusive):
            self._backend.check_concurrency(concurrency)
            self._backend.claim_lock_session(self)
        self.counts = ConsumerCounts()
        self._worker = AsyncWorker(
            transport,
            self._handle,
            concurrency=concurrency,
            visibility=visibility,
            retry=retry,
            idle_backoff=idle_backoff,
            hooks=hooks,
            name=name,
        )

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

        Raises SlotCountMismatch when the queue uses another slot count, and what
        :meth:`AsyncWorker.run <pgque.core.worker.AsyncWorker.run>` raises.
        """
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
        """Release a key held by ``pause``: dead-letter its failed event (or retry it afresh
        with ``drop_head=False``) so the key's later events flow. Returns False if the key's
        group is not blocked. Ordered tier only (raises InvalidInput otherwise).
        """
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
            await self._call(event, KeyContext(key=key, lease=lease))
            return
        entered = False
        try:
            async with self._backend.key_lock(key, tier.lock_ttl) as grant:
                entered = True
                if grant is None:
                    if tier.contention == "drop":
                        self.counts.add("dropped")
                        return
                    self.counts.add("deferred")
                    raise Retry(tier.defer_delay)
                context = KeyContext(
                    key=key, lease=lease, epoch=grant.epoch, connection=grant.connection
                )
                await self._call(event, context)
        except ConfigurationError as exc:
            if entered:
                raise  # the handler's own error
            # The lock layer cannot work as configured: not this message's failure (retrying
            # would only spend its attempts), so the worker stops with the error.
            raise StopWorker(exc) from exc
