"""The asyncio in-memory transport: the reference model behind the contract."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType

from pgque.core.contract import ErrorLike
from pgque.core.errors import InvalidInput
from pgque.core.memory._store import MemoryStore
from pgque.core.models import (
    Capabilities,
    DeadLetter,
    Event,
    GroupInfo,
    GroupStateName,
    Lease,
    QueueStats,
    ScheduledMessage,
    Settlement,
    SettleResult,
)
from pgque.core.tracing import traced_publish
from pgque.core.transport_base import TransportBase
from pgque.core.validation import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_EVENT_BYTES,
    OnExhausted,
    TransportOptions,
    check_after_id,
    check_batch_size,
    check_claim_count,
    check_delay,
    check_entry_name,
    check_error,
    check_group_id,
    check_groups_page,
    check_head,
    check_holder,
    check_holders,
    check_ids,
    check_lease,
    check_limit,
    check_message_id,
    check_oldest_groups,
    check_priority,
    check_reason,
    check_scheduled_page,
    check_seconds,
    check_settlements,
    check_tick,
)

__all__ = ["AsyncInMemoryTransport"]

_CAPABILITIES = Capabilities(
    injected_clock=True,
    priorities=True,
    dead_letters=True,
    transactional_publish=False,
    durable=False,
    purge=True,
    queues=True,
    scheduling=True,
)


class AsyncInMemoryTransport(TransportBase):
    """A per-group FIFO queue held in this process's memory (asyncio API).

    Task-safe and thread-safe: each operation runs under the store's lock without awaiting, so
    it is atomic. Several transports on one :class:`MemoryStore` share its queues, as workers
    share a database. ``clock`` (epoch seconds) makes time deterministic in tests.
    Raises InvalidInput for invalid options.
    """

    CAPABILITIES = _CAPABILITIES

    def __init__(
        self,
        *,
        queue: str = "default",
        max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
        on_exhausted: OnExhausted = "dead_letter",
        clock: Callable[[], float] | None = None,
        store: MemoryStore | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._options = TransportOptions(
            queue=queue,
            max_attempts=max_attempts,
            on_exhausted=on_exhausted,
            clock=clock,
            max_event_bytes=max_event_bytes,
        )
        TransportBase.__init__(self, self._options)
        self._store = store if store is not None else MemoryStore()

    @property
    def max_attempts(self) -> int | None:
        """Deliveries a head gets before ``on_exhausted`` applies; None means unlimited."""
        return self._options.max_attempts

    @property
    def on_exhausted(self) -> OnExhausted:
        """What happens to a head that used up ``max_attempts``: dead_letter or block."""
        return self._options.on_exhausted

    @property
    def store(self) -> MemoryStore:
        """The store holding this transport's queue."""
        return self._store

    def _now(self) -> float:
        clock = self._options.clock
        return clock() if clock is not None else time.time()

    def _lease(self, lease: object) -> Lease:
        return check_lease(lease, self.queue, self._store.origin)

    @traced_publish
    async def publish(
        self, group_id: str, event: Event, *, priority: int = 0, delay: float = 0.0
    ) -> int:
        """Append *event* to *group_id*'s tail and return its message id.

        With *delay* > 0 the message is scheduled: it joins the tail when *delay* has passed.
        Raises InvalidInput for a bad group id, priority, delay or event.
        """
        self._check_open()
        group_id = check_group_id(group_id)
        priority = check_priority(priority)
        delay = check_delay(delay)
        text = self._options.event(event)
        with self._store.lock:
            model = self._store.model(self.queue)
            now = self._now()
            if delay > 0:
                return model.schedule(group_id, text, priority, now, now + delay)
            return model.publish(group_id, text, priority, now)

    @traced_publish
    async def publish_many(
        self, items: Iterable[tuple[str, Event]], *, priority: int = 0, delay: float = 0.0
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids.

        With *delay* > 0 every item is scheduled, all with one due time.
        """
        self._check_open()
        priority = check_priority(priority)
        delay = check_delay(delay)
        checked = self._options.items(items)
        with self._store.lock:
            model = self._store.model(self.queue)
            now = self._now()
            if delay > 0:
                due_at = now + delay
                return [model.schedule(g, text, priority, now, due_at) for g, _e, text in checked]
            return [model.publish(g, text, priority, now) for g, _event, text in checked]

    async def cancel(self, message_id: int) -> bool:
        """Drop a scheduled message that is not due yet; True if it was dropped.

        False when it is due (or delivered), unknown, or was published without a delay.
        Raises InvalidInput for an id that is not a positive int.
        """
        self._check_open()
        message_id = check_message_id(message_id)
        with self._store.lock:
            return self._store.model(self.queue).cancel(message_id, self._now())

    async def scheduled(
        self, *, limit: int = 100, after: int | None = None
    ) -> list[ScheduledMessage]:
        """Up to *limit* (1-1,000) scheduled messages not due yet, in id order, after id *after*."""
        self._check_open()
        size, start = check_scheduled_page(limit, after)
        with self._store.lock:
            return self._store.model(self.queue).scheduled_page(self._now(), size, start)

    @traced_publish
    async def publish_tick(
        self, entry: str, tick: float, group_id: str, event: Event, *, priority: int = 0
    ) -> int | None:
        """Publish *event* as tick *tick* of schedule entry *entry*, unless it was already.

        Returns the message id, or None when this tick (or a later one) of *entry* was
        published to this queue; the check, the record and the append are one step.
        """
        self._check_open()
        entry = check_entry_name(entry)
        tick = check_tick(tick)
        group_id = check_group_id(group_id)
        priority = check_priority(priority)
        text = self._options.event(event)
        with self._store.lock:
            model = self._store.model(self.queue)
            return model.publish_tick(entry, tick, group_id, text, priority, self._now())

    async def server_time(self) -> float:
        """Return the store's time now (its injected clock, else this machine's)."""
        self._check_open()
        return self._now()

    async def last_tick(self, entry: str) -> float | None:
        """The latest tick of *entry* published by :meth:`publish_tick`, or None."""
        self._check_open()
        entry = check_entry_name(entry)
        with self._store.lock:
            return self._store.model(self.queue).last_tick(entry)

    async def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Lease | None:
        """Lease the head of the longest-unserved claimable group, or return None.

        *holder* labels the lease (``GroupInfo.lease_holder``).
        """
        leases = await self.claim_many(1, visibility, min_priority=min_priority, holder=holder)
        return leases[0] if leases else None

    async def claim_many(
        self,
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | None = None,
    ) -> list[Lease]:
        """Lease the heads of up to *n* distinct groups."""
        self._check_open()
        n = check_batch_size(n)
        visibility = check_seconds(visibility, "visibility")
        min_priority = check_priority(min_priority, "min_priority")
        holder = check_holder(holder)
        with self._store.lock:
            return self._store.model(self.queue).claim_many(
                n,
                self._now(),
                visibility,
                min_priority,
                holder=holder,
                max_attempts=self._options.max_attempts,
                on_exhausted=self._options.on_exhausted,
            )

    async def ack(self, lease: Lease) -> bool:
        """Remove the leased message and free its group; False if the lease is not held."""
        self._check_open()
        lease = self._lease(lease)
        with self._store.lock:
            return self._store.model(self.queue).ack(lease, self._now())

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases in one call; one result per lease, in order."""
        self._check_open()
        checked = [self._lease(lease) for lease in leases]
        with self._store.lock:
            model = self._store.model(self.queue)
            now = self._now()
            return [model.ack(lease, now) for lease in checked]

    async def nack(
        self, lease: Lease, *, delay: float = 0.0, error: ErrorLike | None = None
    ) -> bool:
        """Give the message back (the attempt counts); with *delay* > 0 park its group.

        *error* becomes the message's ``last_error``; without it the stored one stays.
        """
        self._check_open()
        lease = self._lease(lease)
        delay = check_seconds(delay, "delay")
        now = self._now()
        info = check_error(error, now)
        with self._store.lock:
            return self._store.model(self.queue).nack(lease, now, delay, info)

    async def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | Sequence[str] | None = None,
    ) -> SettleResult:
        """Settle finished leases, then lease up to *n* new heads, atomically."""
        self._check_open()
        now = self._now()
        checked = check_settlements(settlements, self.queue, self._store.origin, now)
        n = check_claim_count(n)
        visibility = check_seconds(visibility, "visibility")
        min_priority = check_priority(min_priority, "min_priority")
        holders = check_holders(holder, n)
        with self._store.lock:
            return self._store.model(self.queue).settle_and_claim(
                checked,
                n,
                now,
                visibility,
                min_priority,
                holder=holders,
                max_attempts=self._options.max_attempts,
                on_exhausted=self._options.on_exhausted,
            )

    async def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew a held lease to expire *visibility* seconds from now; None if not held."""
        self._check_open()
        lease = self._lease(lease)
        visibility = check_seconds(visibility, "visibility")
        with self._store.lock:
            return self._store.model(self.queue).extend(lease, self._now(), visibility)

    async def release(self, lease: Lease) -> bool:
        """Give the message back for immediate redelivery without counting the attempt.

        False if the lease is not held.
        """
        self._check_open()
        lease = self._lease(lease)
        with self._store.lock:
            return self._store.model(self.queue).release(lease, self._now())

    async def dead_letter(
        self, lease: Lease, reason: str, *, error: ErrorLike | None = None
    ) -> bool:
        """Move the leased message to the dead-letter store; its group continues.

        The dead letter keeps *error*, else the last error a nack recorded.
        """
        self._check_open()
        lease = self._lease(lease)
        reason = check_reason(reason)
        now = self._now()
        info = check_error(error, now)
        with self._store.lock:
            return self._store.model(self.queue).dead_letter(lease, now, reason, info)

    async def dead_letters(self, limit: int = 100, *, after: int | None = None) -> list[DeadLetter]:
        """List up to *limit* dead letters with id > *after*, oldest first."""
        self._check_open()
        limit = check_limit(limit)
        start = check_after_id(after)
        with self._store.lock:
            return self._store.model(self.queue).dead_letters(limit, start)

    async def redrive(
        self, ids: Sequence[int] | None = None, *, in_place: bool = True, retry_now: bool = False
    ) -> int:
        """Return dead letters (all when *ids* is None) to their groups; return how many.

        In place: with their original message ids, in id order; else anew at the tail. With
        *retry_now* a group waiting out a retry delay is claimable at once.
        """
        self._check_open()
        chosen = check_ids(ids)
        with self._store.lock:
            return self._store.model(self.queue).redrive(
                chosen, self._now(), bool(in_place), bool(retry_now)
            )

    async def delete_dead_letters(self, ids: Sequence[int]) -> int:
        """Delete the dead letters with these ids; return how many were deleted."""
        self._check_open()
        chosen = check_ids(ids)
        if chosen is None:
            raise InvalidInput("ids must be a sequence of ints, not None")
        with self._store.lock:
            return self._store.model(self.queue).delete_dead_letters(chosen)

    async def unblock(
        self, group_id: str, *, drop_head: bool = False, head: int | None = None
    ) -> bool:
        """Release a group blocked by ``on_exhausted="block"`` (with *head*: only if that
        message is its head)."""
        self._check_open()
        group_id = check_group_id(group_id)
        head = check_head(head)
        with self._store.lock:
            return self._store.model(self.queue).unblock(
                group_id, self._now(), bool(drop_head), head
            )

    async def retry_now(self, group_id: str) -> bool:
        """End the retry delay the group is waiting out; False if it waits for none."""
        self._check_open()
        group_id = check_group_id(group_id)
        with self._store.lock:
            return self._store.model(self.queue).retry_now(group_id, self._now())

    async def group(self, group_id: str) -> GroupInfo | None:
        """Everything about one group, or None if this queue has no such group."""
        self._check_open()
        group_id = check_group_id(group_id)
        with self._store.lock:
            return self._store.model(self.queue).group(group_id, self._now())

    async def groups(
        self,
        *,
        state: GroupStateName | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups in byte order of id, those after *after*."""
        self._check_open()
        chosen, size, start = check_groups_page(state, limit, after)
        with self._store.lock:
            return self._store.model(self.queue).groups_page(self._now(), chosen, size, start)

    async def oldest_groups(
        self,
        *,
        limit: int = 10,
        state: GroupStateName | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups holding a message, the oldest head first."""
        self._check_open()
        chosen, size = check_oldest_groups(state, limit)
        with self._store.lock:
            return self._store.model(self.queue).oldest_groups(self._now(), chosen, size)

    async def pause(self, group_id: str) -> bool:
        """Hold *group_id* until :meth:`resume`; False if it was paused already."""
        self._check_open()
        group_id = check_group_id(group_id)
        with self._store.lock:
            return self._store.model(self.queue).pause(group_id, self._now())

    async def resume(self, group_id: str) -> bool:
        """Lift the hold of :meth:`pause`; False if the group is not paused."""
        self._check_open()
        group_id = check_group_id(group_id)
        with self._store.lock:
            return self._store.model(self.queue).resume(group_id, self._now())

    async def stats(self) -> QueueStats:
        """Return counts of groups, messages, in-flight, parked, blocked and dead letters."""
        self._check_open()
        with self._store.lock:
            return self._store.model(self.queue).stats(self._now())

    async def queues(self) -> list[str]:
        """Return the names of every queue in this store that holds messages or dead letters.

        Sorted in byte order, as the server-backed transports sort them. Raises
        TransportClosed after close().
        """
        self._check_open()
        with self._store.lock:
            return self._store.queue_names()

    async def purge(self) -> None:
        """Delete every message, group, dead letter, scheduled message and tick record of this
        queue (tests, operators).

        Not part of the transport contract (the PostgreSQL and Redis transports have it too).
        Message ids keep growing. Raises TransportClosed after close().
        """
        self._check_open()
        with self._store.lock:
            self._store.model(self.queue).purge()

    async def close(self) -> None:
        """Mark the transport closed; the store's data stays for other transports."""
        self._closed = True

    async def __aenter__(self) -> AsyncInMemoryTransport:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
