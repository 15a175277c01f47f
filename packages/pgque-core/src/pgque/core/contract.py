"""The two protocols a backend implements: :class:`Transport` (sync) and
:class:`AsyncTransport` (every method ``async``). They are identical apart from ``async``.

Backends need not inherit from these; ``isinstance(obj, Transport)`` checks the shape, and the
conformance suite checks the behaviour. Abilities beyond the contract are protocols of their own,
each matched by a :class:`~pgque.core.Capabilities` flag: :class:`SupportsWakeups` (``wakeups``)
and :class:`SupportsPurge` (``purge``), with their asyncio twins.

Semantics, in short (docs/concepts.md has the long form):

- A *group* delivers one message at a time, in publish order. A lease on its head excludes
  every other claimer until ack, nack, expiry or dead-letter.
- ``claim`` serves the claimable group that was served longest ago (never-served groups first,
  ties by group id): round-robin, so one hot group cannot starve cold ones.
- Every write taking a lease is fenced by its token: a stale holder gets ``False``/``None``.
- Delivery is at least once: an expired lease is redelivered with a new token, ``attempt + 1``.
- A publish with ``delay > 0`` is *scheduled*: invisible (no group, no count but
  ``QueueStats.scheduled``) until its due time, when it joins its group's tail with the same id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from pgque.core.browse import MessageInfo, MessagePage
from pgque.core.bulk import MAX_BULK, BulkResult
from pgque.core.history import HistoryRetention
from pgque.core.live_workers import WorkerBeat
from pgque.core.models import (
    Capabilities,
    DeadLetter,
    ErrorInfo,
    Event,
    GroupInfo,
    GroupStateName,
    HistoryOutcome,
    HistoryRecord,
    KeyInfo,
    KeyPolicy,
    Lease,
    QueueStats,
    ScheduledMessage,
    Settlement,
    SettleResult,
    WorkerInfo,
)
from pgque.core.transport_options import OnExhausted

#: What ``nack``/``dead_letter`` accept as ``error=``: an exception, a string, or a record.
ErrorLike = BaseException | str | ErrorInfo

__all__ = [
    "ErrorLike",
    "Transport",
    "AsyncTransport",
    "SupportsWakeups",
    "AsyncSupportsWakeups",
    "SupportsPurge",
    "SupportsQueues",
    "AsyncSupportsQueues",
    "AsyncSupportsPurge",
    "SupportsServerTime",
    "AsyncSupportsServerTime",
    "SupportsFairness",
    "AsyncSupportsFairness",
    "SettleTransaction",
    "AsyncSettleTransaction",
    "SupportsSettleIn",
    "AsyncSupportsSettleIn",
    "SupportsHistory",
    "AsyncSupportsHistory",
    "SupportsBrowse",
    "AsyncSupportsBrowse",
    "SupportsWorkers",
    "AsyncSupportsWorkers",
]


@runtime_checkable
class Transport(Protocol):
    """A per-group FIFO queue (blocking API)."""

    @property
    def capabilities(self) -> Capabilities:
        """What this transport supports."""
        ...

    @property
    def queue(self) -> str:
        """The queue name this transport works on."""
        ...

    @property
    def max_attempts(self) -> int | None:
        """Deliveries a head gets before ``on_exhausted`` applies; None means unlimited."""
        ...

    @property
    def on_exhausted(self) -> OnExhausted:
        """What happens to a head that used up ``max_attempts``: dead_letter or block."""
        ...

    def publish(
        self,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
    ) -> int:
        """Append *event* to *group_id*'s tail and return its message id (monotonic).

        *priority* (0-4) and *fairness_key* are fixed by a group's first publish while it has
        messages; a key needs ``Capabilities.fairness`` (docs/fairness.md).
        With *delay* > 0 (seconds, at most a year) the message is scheduled: it joins the tail
        of its group when *delay* has passed by the server's clock, keeping the returned id;
        until then no claim sees it and it does not hold up its group. Scheduled messages of
        one group falling due at the same time join in publish order.
        Raises InvalidInput for a bad group id, priority, delay or event.
        """
        ...

    def publish_many(
        self,
        items: Iterable[tuple[str, Event]],
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids.

        With *delay* > 0 every item is scheduled, and *fairness_key* applies to every item, as
        :meth:`publish` says.
        """
        ...

    def cancel(self, message_id: int) -> bool:
        """Drop a scheduled message that is not due yet; True if it was dropped.

        False when the message is due (or delivered), unknown, or was published without a
        delay. Raises InvalidInput for an id that is not a positive int.
        """
        ...

    def scheduled(self, *, limit: int = 100, after: int | None = None) -> list[ScheduledMessage]:
        """Up to *limit* (1-1,000) scheduled messages not due yet, in id order, after id *after*."""
        ...

    def publish_tick(
        self,
        entry: str,
        tick: float,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        fairness_key: str | None = None,
    ) -> int | None:
        """Publish *event* as tick *tick* (epoch seconds) of the schedule entry *entry*.

        It is appended only if no tick of *entry* at or after *tick* was published to this
        queue; that check, recording *tick* as the entry's last one, and the append are one
        atomic step, so of several schedulers publishing one tick exactly one appends. Returns
        the message id, or None when the tick (or a later one) was already published.
        """
        ...

    def last_tick(self, entry: str) -> float | None:
        """The latest tick of *entry* published by :meth:`publish_tick`, or None."""
        ...

    def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Lease | None:
        """Lease the head of the longest-unserved claimable group, or return None.

        *holder* (at most 200 characters) labels who holds the lease, for
        ``GroupInfo.lease_holder``; the Worker passes ``host:pid:slot``.
        """
        ...

    def claim_many(
        self,
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | None = None,
    ) -> list[Lease]:
        """Lease the heads of up to *n* distinct groups (never two of one group)."""
        ...

    def ack(self, lease: Lease) -> bool:
        """Remove the leased message and free its group; False if the lease is not held."""
        ...

    def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases in one call; one result per lease, in order."""
        ...

    def nack(self, lease: Lease, *, delay: float = 0.0, error: ErrorLike | None = None) -> bool:
        """Give the message back (the attempt counts); with *delay* > 0 park its group.

        *error* (an exception, a string or an ErrorInfo) becomes the group's ``last_error``
        and, should the message be dead-lettered later, its ``DeadLetter.error``; without it
        ``last_error`` stays as it was.
        """
        ...

    def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | Sequence[str] | None = None,
    ) -> SettleResult:
        """Settle finished leases and lease up to *n* new heads, in one atomic server call.

        Each :class:`Settlement` acts as its ``ack``/``nack``/``release``/``dead_letter``
        would, in order, each fenced on its own (``settled[i]`` False: not held, no change);
        then up to *n* heads of distinct claimable groups are leased as ``claim_many`` would
        (*n* may be 0: settle only); *holder* labels them all, or, a list of *n* labels, lease
        *i* with label *i* (a worker filling several slots at once names each slot).
        A settlement that fails its fence never stops the claim,
        and an empty claim never undoes a settlement; the call as a whole is one transaction
        (one script on Redis), so a lost connection leaves either all of it or none.
        At most 10,000 settlements; all leases must be this queue's. Raises InvalidInput
        before any I/O for a bad settlement, *n*, *visibility*, *min_priority* or *holder*.
        """
        ...

    def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew a held lease to expire *visibility* seconds from now; None if not held."""
        ...

    def release(self, lease: Lease) -> bool:
        """Give the message back for immediate redelivery without counting the attempt.

        For a graceful shutdown. Fenced like ``ack``: False if the lease is not held.
        """
        ...

    def dead_letter(self, lease: Lease, reason: str, *, error: ErrorLike | None = None) -> bool:
        """Move the leased message to the dead-letter store; its group continues.

        *error* is kept as ``DeadLetter.error`` (else the last error a nack recorded).
        """
        ...

    def dead_letters(self, limit: int = 100, *, after: int | None = None) -> list[DeadLetter]:
        """List up to *limit* dead letters in id order (oldest first), those after id *after*."""
        ...

    def redrive(
        self, ids: Sequence[int] | None = None, *, in_place: bool = True, retry_now: bool = False
    ) -> int:
        """Return dead letters (all when *ids* is None) to their groups; return how many.

        In place (the default) a dead letter goes back with its original message id, ahead
        of every later message of its group not yet delivered (a message in flight finishes
        first), and starts again at attempt 1, keeping its error as its ``last_error``.
        ``in_place=False`` publishes it anew at the tail. A group waiting out a retry delay
        keeps waiting unless *retry_now* (then, as :meth:`retry_now`, it is claimable at once).
        """
        ...

    def unblock(self, group_id: str, *, drop_head: bool = False, head: int | None = None) -> bool:
        """Release a group blocked by ``on_exhausted="block"``.

        The head is retried with a fresh attempt count, or dead-lettered when *drop_head*.
        With *head* (a message id), only if that message is still the group's head.
        Returns False if the group is not blocked (or its head is another message).
        """
        ...

    def retry_now(self, group_id: str) -> bool:
        """End the retry delay the group is waiting out: its head is claimable at once, its
        attempt count and last error kept (a paused group stays paused).

        Returns False if the group is not waiting for a retry (no such group, ready, leased
        or blocked).
        """
        ...

    def delete_dead_letters(self, ids: Sequence[int]) -> int:
        """Delete the dead letters with these ids; return how many were deleted."""
        ...

    def group(self, group_id: str) -> GroupInfo | None:
        """Everything about one group, or None if this queue has no such group."""
        ...

    def groups(
        self,
        *,
        state: GroupStateName | None = None,
        limit: int = 100,
        after: str | None = None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups in byte order of id, those after *after*.

        Keyset paging: pass the last ``group_id`` of a page as *after* for the next one.
        With *state*, only groups in that state; with *prefix*, only groups whose id starts
        with it.
        """
        ...

    def oldest_groups(
        self,
        *,
        limit: int = 10,
        state: GroupStateName | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups that hold a message, the oldest head first.

        Ordered by ``head_enqueued_at``, then by group id in byte order: the groups waiting
        longest for their next message to finish, stuck ones first. With *state*, only groups
        in that state. Exact at any size (no sampling): served by an index of enqueue times.
        """
        ...

    def pause(self, group_id: str) -> bool:
        """Hold *group_id*: no claim leases it until :meth:`resume` (a lease out finishes).

        Publishes still append; an empty paused group is kept; a group that does not exist
        yet is created paused. False if it was already paused.
        """
        ...

    def resume(self, group_id: str) -> bool:
        """Lift the hold of :meth:`pause`; False if the group is not paused."""
        ...

    def bulk_pause(
        self,
        *,
        group_ids: Sequence[str] | None = None,
        state: GroupStateName | None = None,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = MAX_BULK,
        after: str | None = None,
        dry_run: bool = False,
    ) -> BulkResult[str]:
        """Pause the groups selected by *group_ids* and/or a filter (*state*, fairness *key*,
        id *prefix*); at most *limit* (1-1,000) per call; how many matched and changed
        (:mod:`pgque.core.bulk`). InvalidInput when neither ids nor a filter is given."""
        ...

    def bulk_resume(
        self,
        *,
        group_ids: Sequence[str] | None = None,
        state: GroupStateName | None = None,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = MAX_BULK,
        after: str | None = None,
        dry_run: bool = False,
    ) -> BulkResult[str]:
        """Resume the selected groups; as :meth:`bulk_pause` selects them."""
        ...

    def bulk_retry_now(
        self,
        *,
        group_ids: Sequence[str] | None = None,
        state: GroupStateName | None = None,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = MAX_BULK,
        after: str | None = None,
        dry_run: bool = False,
    ) -> BulkResult[str]:
        """End the retry delay of the selected groups; as :meth:`bulk_pause` selects them."""
        ...

    def bulk_redrive(
        self,
        *,
        ids: Sequence[int] | None = None,
        prefix: str | None = None,
        kind: str | None = None,
        limit: int = MAX_BULK,
        after: int | None = None,
        dry_run: bool = False,
        in_place: bool = True,
        retry_now: bool = False,
    ) -> BulkResult[int]:
        """Redrive the dead letters selected by *ids* and/or a filter (group id *prefix*, event
        *kind*); at most *limit* (1-1,000) per call; how many matched and changed."""
        ...

    def bulk_delete_dead_letters(
        self,
        *,
        ids: Sequence[int] | None = None,
        prefix: str | None = None,
        kind: str | None = None,
        limit: int = MAX_BULK,
        after: int | None = None,
        dry_run: bool = False,
    ) -> BulkResult[int]:
        """Delete the selected dead letters; as :meth:`bulk_redrive` selects them."""
        ...

    def stats(self) -> QueueStats:
        """Return counts of groups, messages, in-flight, parked, blocked and dead letters."""
        ...

    def close(self) -> None:
        """Release connections; idempotent."""
        ...

    def __enter__(self) -> Transport: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class AsyncTransport(Protocol):
    """A per-group FIFO queue (asyncio API); the twin of :class:`Transport`."""

    @property
    def capabilities(self) -> Capabilities:
        """What this transport supports."""
        ...

    @property
    def queue(self) -> str:
        """The queue name this transport works on."""
        ...

    @property
    def max_attempts(self) -> int | None:
        """Deliveries a head gets before ``on_exhausted`` applies; None means unlimited."""
        ...

    @property
    def on_exhausted(self) -> OnExhausted:
        """What happens to a head that used up ``max_attempts``: dead_letter or block."""
        ...

    async def publish(
        self,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
    ) -> int:
        """Append *event* to *group_id*'s tail and return its message id (monotonic).

        With *delay* > 0 the message is scheduled, and *fairness_key* is fixed like the
        priority, as :meth:`Transport.publish` says.
        """
        ...

    async def publish_many(
        self,
        items: Iterable[tuple[str, Event]],
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids."""
        ...

    async def cancel(self, message_id: int) -> bool:
        """Drop a scheduled message that is not due yet; as :meth:`Transport.cancel`."""
        ...

    async def scheduled(
        self, *, limit: int = 100, after: int | None = None
    ) -> list[ScheduledMessage]:
        """Up to *limit* (1-1,000) scheduled messages not due yet, in id order, after id *after*."""
        ...

    async def publish_tick(
        self,
        entry: str,
        tick: float,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        fairness_key: str | None = None,
    ) -> int | None:
        """Publish tick *tick* of schedule entry *entry* once; as :meth:`Transport.publish_tick`."""
        ...

    async def last_tick(self, entry: str) -> float | None:
        """The latest tick of *entry* published by :meth:`publish_tick`, or None."""
        ...

    async def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Lease | None:
        """Lease the head of the longest-unserved claimable group, or return None.

        *holder* (at most 200 characters) labels who holds the lease, for
        ``GroupInfo.lease_holder``; the Worker passes ``host:pid:slot``.
        """
        ...

    async def claim_many(
        self,
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | None = None,
    ) -> list[Lease]:
        """Lease the heads of up to *n* distinct groups (never two of one group)."""
        ...

    async def ack(self, lease: Lease) -> bool:
        """Remove the leased message and free its group; False if the lease is not held."""
        ...

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases in one call; one result per lease, in order."""
        ...

    async def nack(
        self, lease: Lease, *, delay: float = 0.0, error: ErrorLike | None = None
    ) -> bool:
        """Give the message back (the attempt counts); with *delay* > 0 park its group.

        *error* (an exception, a string or an ErrorInfo) becomes the group's ``last_error``
        and, should the message be dead-lettered later, its ``DeadLetter.error``; without it
        ``last_error`` stays as it was.
        """
        ...

    async def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        n: int,
        visibility: float = 30.0,
        *,
        min_priority: int = 0,
        holder: str | Sequence[str] | None = None,
    ) -> SettleResult:
        """Settle finished leases and lease up to *n* new heads, in one atomic server call.

        Each :class:`Settlement` acts as its ``ack``/``nack``/``release``/``dead_letter``
        would, in order, each fenced on its own (``settled[i]`` False: not held, no change);
        then up to *n* heads of distinct claimable groups are leased as ``claim_many`` would
        (*n* may be 0: settle only); *holder* labels them all, or, a list of *n* labels, lease
        *i* with label *i* (a worker filling several slots at once names each slot).
        A settlement that fails its fence never stops the claim,
        and an empty claim never undoes a settlement; the call as a whole is one transaction
        (one script on Redis), so a lost connection leaves either all of it or none.
        At most 10,000 settlements; all leases must be this queue's. Raises InvalidInput
        before any I/O for a bad settlement, *n*, *visibility*, *min_priority* or *holder*.
        """
        ...

    async def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew a held lease to expire *visibility* seconds from now; None if not held."""
        ...

    async def release(self, lease: Lease) -> bool:
        """Give the message back for immediate redelivery without counting the attempt.

        For a graceful shutdown. Fenced like ``ack``: False if the lease is not held.
        """
        ...

    async def dead_letter(
        self, lease: Lease, reason: str, *, error: ErrorLike | None = None
    ) -> bool:
        """Move the leased message to the dead-letter store; its group continues.

        *error* is kept as ``DeadLetter.error`` (else the last error a nack recorded).
        """
        ...

    async def dead_letters(self, limit: int = 100, *, after: int | None = None) -> list[DeadLetter]:
        """List up to *limit* dead letters in id order (oldest first), those after id *after*."""
        ...

    async def redrive(
        self, ids: Sequence[int] | None = None, *, in_place: bool = True, retry_now: bool = False
    ) -> int:
        """Return dead letters (all when *ids* is None) to their groups; return how many.

        As :meth:`Transport.redrive`.
        """
        ...

    async def unblock(
        self, group_id: str, *, drop_head: bool = False, head: int | None = None
    ) -> bool:
        """Release a group blocked by ``on_exhausted="block"`` (as :meth:`Transport.unblock`)."""
        ...

    async def retry_now(self, group_id: str) -> bool:
        """End the retry delay the group is waiting out (as :meth:`Transport.retry_now`)."""
        ...

    async def delete_dead_letters(self, ids: Sequence[int]) -> int:
        """Delete the dead letters with these ids; return how many were deleted."""
        ...

    async def group(self, group_id: str) -> GroupInfo | None:
        """Everything about one group, or None if this queue has no such group."""
        ...

    async def groups(
        self,
        *,
        state: GroupStateName | None = None,
        limit: int = 100,
        after: str | None = None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups in byte order of id, those after *after* (only
        those whose id starts with *prefix* when given)."""
        ...

    async def oldest_groups(
        self,
        *,
        limit: int = 10,
        state: GroupStateName | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups that hold a message, the oldest head first.

        Ordered by ``head_enqueued_at``, then by group id in byte order: the groups waiting
        longest for their next message to finish, stuck ones first. With *state*, only groups
        in that state. Exact at any size (no sampling): served by an index of enqueue times.
        """
        ...

    async def pause(self, group_id: str) -> bool:
        """Hold *group_id* until :meth:`resume`; as :meth:`Transport.pause`."""
        ...

    async def resume(self, group_id: str) -> bool:
        """Lift the hold of :meth:`pause`; False if the group is not paused."""
        ...

    async def bulk_pause(
        self,
        *,
        group_ids: Sequence[str] | None = None,
        state: GroupStateName | None = None,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = MAX_BULK,
        after: str | None = None,
        dry_run: bool = False,
    ) -> BulkResult[str]:
        """Pause the groups selected by *group_ids* and/or a filter (*state*, fairness *key*,
        id *prefix*); at most *limit* (1-1,000) per call; how many matched and changed
        (:mod:`pgque.core.bulk`). InvalidInput when neither ids nor a filter is given."""
        ...

    async def bulk_resume(
        self,
        *,
        group_ids: Sequence[str] | None = None,
        state: GroupStateName | None = None,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = MAX_BULK,
        after: str | None = None,
        dry_run: bool = False,
    ) -> BulkResult[str]:
        """Resume the selected groups; as :meth:`Transport.bulk_pause` selects them."""
        ...

    async def bulk_retry_now(
        self,
        *,
        group_ids: Sequence[str] | None = None,
        state: GroupStateName | None = None,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = MAX_BULK,
        after: str | None = None,
        dry_run: bool = False,
    ) -> BulkResult[str]:
        """End the retry delay of the selected groups; as :meth:`Transport.bulk_pause`
        selects them."""
        ...

    async def bulk_redrive(
        self,
        *,
        ids: Sequence[int] | None = None,
        prefix: str | None = None,
        kind: str | None = None,
        limit: int = MAX_BULK,
        after: int | None = None,
        dry_run: bool = False,
        in_place: bool = True,
        retry_now: bool = False,
    ) -> BulkResult[int]:
        """Redrive the dead letters selected by *ids* and/or a filter (group id *prefix*, event
        *kind*); at most *limit* (1-1,000) per call; how many matched and changed."""
        ...

    async def bulk_delete_dead_letters(
        self,
        *,
        ids: Sequence[int] | None = None,
        prefix: str | None = None,
        kind: str | None = None,
        limit: int = MAX_BULK,
        after: int | None = None,
        dry_run: bool = False,
    ) -> BulkResult[int]:
        """Delete the selected dead letters; as :meth:`Transport.bulk_redrive` selects them."""
        ...

    async def stats(self) -> QueueStats:
        """Return counts of groups, messages, in-flight, parked, blocked and dead letters."""
        ...

    async def close(self) -> None:
        """Release connections; idempotent."""
        ...

    async def __aenter__(self) -> AsyncTransport: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class SupportsWakeups(Protocol):
    """A blocking transport that can wake idle workers (``Capabilities.wakeups``)."""

    def wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news of claimable messages; True if some came.

        A True may be spurious (the caller claims and finds nothing); False means the time
        passed. The first call returns True once it listens (a publish just before it was not
        heard). Raises InvalidInput for a bad timeout, TransportClosed or ConnectionLost.
        """
        ...


@runtime_checkable
class AsyncSupportsWakeups(Protocol):
    """An asyncio transport that can wake idle workers; the twin of :class:`SupportsWakeups`."""

    async def wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news of claimable messages; True if some came.

        As :meth:`SupportsWakeups.wait_for_messages`.
        """
        ...


@runtime_checkable
class SupportsServerTime(Protocol):
    """A blocking transport that can read its store's clock (the one that judges leases)."""

    def server_time(self) -> float:
        """Return the store's time now, epoch seconds (PostgreSQL ``clock_timestamp()``,
        Redis ``TIME``; an injected test clock when the transport has one).

        A scheduler starts a never-published entry's ticks from it, so that schedulers whose
        own clocks disagree agree on the first tick. Raises ConnectionLost or PgqueError.
        """
        ...


@runtime_checkable
class AsyncSupportsServerTime(Protocol):
    """An asyncio transport that can read its store's clock; the twin of
    :class:`SupportsServerTime`."""

    async def server_time(self) -> float:
        """Return the store's time now, epoch seconds; as :meth:`SupportsServerTime.server_time`."""
        ...


@runtime_checkable
class SupportsPurge(Protocol):
    """A blocking transport that can empty its queue (``Capabilities.purge``)."""

    def purge(self) -> None:
        """Delete every message, group and dead letter of this queue (tests, operators).

        Raises TransportClosed, ConnectionLost or PgqueError.
        """
        ...


@runtime_checkable
class AsyncSupportsPurge(Protocol):
    """An asyncio transport that can empty its queue; the twin of :class:`SupportsPurge`."""

    async def purge(self) -> None:
        """Delete every message, group and dead letter of this queue (tests, operators).

        Raises TransportClosed, ConnectionLost or PgqueError.
        """
        ...


@runtime_checkable
class SupportsQueues(Protocol):
    """A blocking transport that lists the queues of its store (``Capabilities.queues``)."""

    def queues(self) -> list[str]:
        """Return the names of the store's queues holding messages or dead letters, sorted.

        Raises TransportClosed, ConnectionLost or PgqueError.
        """
        ...


@runtime_checkable
class AsyncSupportsQueues(Protocol):
    """An asyncio transport that lists its store's queues; the twin of :class:`SupportsQueues`."""

    async def queues(self) -> list[str]:
        """Return the names of the store's queues holding messages or dead letters, sorted.

        Raises TransportClosed, ConnectionLost or PgqueError.
        """
        ...


@runtime_checkable
class SupportsFairness(Protocol):
    """A blocking transport with fair shares between keys (``Capabilities.fairness``)."""

    def set_key_policy(
        self,
        key: str | None,
        *,
        weight: float = 1.0,
        max_in_flight: int | None = None,
        rate: float | None = None,
        per: float = 1.0,
        burst: int | None = None,
    ) -> KeyPolicy:
        """Store *key*'s policy (``None``: the default policy; ``""``: the groups published
        without a key) for every worker's next claim; return it (docs/fairness.md)."""
        ...

    def key_policy(self, key: str | None) -> KeyPolicy | None:
        """Return *key*'s own policy, or None if it has none."""
        ...

    def delete_key_policy(self, key: str | None) -> bool:
        """Drop *key*'s own policy; True if it had one."""
        ...

    def key_info(self, key: str) -> KeyInfo | None:
        """Return *key* (``""``: the default key) as :meth:`keys` shows it, or None."""
        ...

    def keys(self, limit: int = 100, *, after: str | None = None) -> list[KeyInfo]:
        """Up to *limit* keys with groups or a policy, after key *after*, in UTF-8 byte order."""
        ...


@runtime_checkable
class AsyncSupportsFairness(Protocol):
    """An asyncio transport with fair shares between keys; the twin of
    :class:`SupportsFairness`."""

    async def set_key_policy(
        self,
        key: str | None,
        *,
        weight: float = 1.0,
        max_in_flight: int | None = None,
        rate: float | None = None,
        per: float = 1.0,
        burst: int | None = None,
    ) -> KeyPolicy:
        """Store *key*'s policy; as :meth:`SupportsFairness.set_key_policy`."""
        ...

    async def key_policy(self, key: str | None) -> KeyPolicy | None:
        """Return *key*'s own policy, or None if it has none."""
        ...

    async def delete_key_policy(self, key: str | None) -> bool:
        """Drop *key*'s own policy; True if it had one."""
        ...

    async def key_info(self, key: str) -> KeyInfo | None:
        """Return *key* (``""``: the default key) as :meth:`keys` shows it, or None."""
        ...

    async def keys(self, limit: int = 100, *, after: str | None = None) -> list[KeyInfo]:
        """Up to *limit* keys with groups or a policy, after key *after*, in UTF-8 byte order."""
        ...


# -- job history (docs/history.md) -------------------------------------------------------------


@runtime_checkable
class SupportsHistory(Protocol):
    """A blocking transport that keeps a queue's job history (``Capabilities.history``)."""

    def set_history(self, setting: HistoryRetention | timedelta | str) -> None:
        """Turn the queue's history on with a retention (``"7d"``, ``"1000000"`` rows, both
        ``"7d,1000000"``, a timedelta or a HistoryRetention) or off (``"off"``), in the store:
        every worker of the queue records alike from its next settlement."""
        ...

    def history(
        self,
        *,
        group: str | None = None,
        kind: str | None = None,
        since: float | datetime | None = None,
        outcome: HistoryOutcome | None = None,
        message_id: int | None = None,
        limit: int = 100,
        after: int | None = None,
    ) -> list[HistoryRecord]:
        """Up to *limit* records matching every filter given, newest first; keyset-paged by
        the last record's ``id`` as *after*."""
        ...


@runtime_checkable
class AsyncSupportsHistory(Protocol):
    """An asyncio transport that keeps a queue's job history; the twin of
    :class:`SupportsHistory`."""

    async def set_history(self, setting: HistoryRetention | timedelta | str) -> None:
        """Turn the queue's history on or off; as :meth:`SupportsHistory.set_history`."""
        ...

    async def history(
        self,
        *,
        group: str | None = None,
        kind: str | None = None,
        since: float | datetime | None = None,
        outcome: HistoryOutcome | None = None,
        message_id: int | None = None,
        limit: int = 100,
        after: int | None = None,
    ) -> list[HistoryRecord]:
        """Records newest first; as :meth:`SupportsHistory.history`."""
        ...


# -- live workers (docs/workers.md) --------------------------------------------------------------


@runtime_checkable
class SupportsWorkers(Protocol):
    """A blocking transport that keeps the queue's live workers (``Capabilities.workers``)."""

    def heartbeat(self, beat: WorkerBeat) -> None:
        """Register the worker *beat* describes, or refresh its row, on the store's clock."""
        ...

    def goodbye(self, worker: str) -> bool:
        """Remove the worker *worker*'s row (a clean stop); False when it had none."""
        ...

    def workers(self, *, include_gone: bool = True) -> list[WorkerInfo]:
        """The queue's workers, each with its slots and the leases held in its name; without
        *include_gone*, only those alive."""
        ...


@runtime_checkable
class AsyncSupportsWorkers(Protocol):
    """An asyncio transport that keeps the queue's live workers; the twin of
    :class:`SupportsWorkers`."""

    async def heartbeat(self, beat: WorkerBeat) -> None:
        """Register or refresh a worker; as :meth:`SupportsWorkers.heartbeat`."""
        ...

    async def goodbye(self, worker: str) -> bool:
        """Remove a worker's row; as :meth:`SupportsWorkers.goodbye`."""
        ...

    async def workers(self, *, include_gone: bool = True) -> list[WorkerInfo]:
        """The queue's workers; as :meth:`SupportsWorkers.workers`."""
        ...


# -- settling in the caller's transaction (docs/transactions.md) ------------------------------


@runtime_checkable
class SettleTransaction(Protocol):
    """The open transaction of :meth:`SupportsSettleIn.settle_in` (blocking API).

    Its lease is acked when the block exits cleanly, unless one of the methods below chose
    another settlement first; each runs in the same transaction and commits with it.
    """

    @property
    def connection(self) -> Any:
        """The connection the transaction is on: write your effects on it."""
        ...

    def nack(self, *, delay: float = 0.0, error: ErrorLike | None = None) -> None:
        """Settle by a nack (as :meth:`Transport.nack`) when the transaction commits."""
        ...

    def dead_letter(self, reason: str, *, error: ErrorLike | None = None) -> None:
        """Settle by a dead letter (as :meth:`Transport.dead_letter`) on commit."""
        ...

    def release(self) -> None:
        """Settle by a release (as :meth:`Transport.release`) on commit."""
        ...


@runtime_checkable
class AsyncSettleTransaction(Protocol):
    """The open transaction of :meth:`AsyncSupportsSettleIn.settle_in` (asyncio API)."""

    @property
    def connection(self) -> Any:
        """The connection the transaction is on: write your effects on it."""
        ...

    async def nack(self, *, delay: float = 0.0, error: ErrorLike | None = None) -> None:
        """See :meth:`SettleTransaction.nack`."""
        ...

    async def dead_letter(self, reason: str, *, error: ErrorLike | None = None) -> None:
        """See :meth:`SettleTransaction.dead_letter`."""
        ...

    async def release(self) -> None:
        """See :meth:`SettleTransaction.release`."""
        ...


@runtime_checkable
class SupportsSettleIn(Protocol):
    """A blocking transport that settles a lease in the caller's transaction
    (``Capabilities.settle_in``; PostgreSQL)."""

    def settle_in(
        self, lease: Lease, connection: Any = None
    ) -> AbstractContextManager[SettleTransaction]:
        """Open a transaction on *connection* (the transport's own when None) in which the
        lease is settled: the block's writes and the settlement commit together, or roll back
        together. Raises LeaseLost on entry for a lease no longer live, Unsupported on a
        backend without the capability."""
        ...


@runtime_checkable
class AsyncSupportsSettleIn(Protocol):
    """An asyncio transport that settles a lease in the caller's transaction."""

    def settle_in(
        self, lease: Lease, connection: Any = None
    ) -> AbstractAsyncContextManager[AsyncSettleTransaction]:
        """See :meth:`SupportsSettleIn.settle_in`."""
        ...


# -- browse and search (docs/reference.md) -----------------------------------------------------


@runtime_checkable
class SupportsBrowse(Protocol):
    """A blocking transport that lists the messages behind their groups' heads
    (``Capabilities.browse``; :mod:`pgque.core.browse`)."""

    def messages(
        self,
        *,
        group_id: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after: int | None = None,
    ) -> MessagePage:
        """A page of messages: a group's in its order (head first), or those of a kind (a
        bounded scan); pass the page's ``next_after`` as *after* for the next one."""
        ...

    def message(self, message_id: int) -> MessageInfo | None:
        """One message, pending, in flight or scheduled; None when settled or unknown."""
        ...

    def scheduled(
        self, *, limit: int = 100, after: int | None = None, group_id: str | None = None
    ) -> list[ScheduledMessage]:
        """Scheduled messages not due yet in id order, only *group_id*'s when given."""
        ...


@runtime_checkable
class AsyncSupportsBrowse(Protocol):
    """An asyncio transport that lists the messages behind their groups' heads; the twin of
    :class:`SupportsBrowse`."""

    async def messages(
        self,
        *,
        group_id: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after: int | None = None,
    ) -> MessagePage:
        """A page of messages; as :meth:`SupportsBrowse.messages`."""
        ...

    async def message(self, message_id: int) -> MessageInfo | None:
        """One message, or None; as :meth:`SupportsBrowse.message`."""
        ...

    async def scheduled(
        self, *, limit: int = 100, after: int | None = None, group_id: str | None = None
    ) -> list[ScheduledMessage]:
        """Scheduled messages not due yet; as :meth:`SupportsBrowse.scheduled`."""
        ...
