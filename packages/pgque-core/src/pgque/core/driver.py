"""The narrow interface a backend implements: :class:`Driver` (blocking) and :class:`AsyncDriver`.

Users call a :class:`~pgque.core.Client` / :class:`~pgque.core.AsyncClient` (the front door,
which *is* a :class:`~pgque.core.Transport` / :class:`~pgque.core.AsyncTransport`); the front
door checks every argument, fills in defaults, turns the conveniences (``claim``, ``ack``,
``nack`` …) into the primitives below, traces publishes, and holds the contract's docstrings.
A driver receives only checked values and maps each primitive to one round trip: one SQL
function, one Lua script, one call of the in-memory model under its lock.

Every primitive that reads or judges time takes ``now``: the injected clock's epoch seconds
(tests), or ``None`` when the store's own clock judges (the database's ``clock_timestamp()``,
Redis ``TIME``, the process clock for memory).

A driver also names itself: :attr:`Driver.backend` (the start of every lease's ``origin``, so
a lease of another backend is refused before any I/O) and :attr:`Driver.capabilities`.
docs/backends.md shows a complete driver and how to run the conformance suite against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from pgque.core.browse import MessageInfo, MessagePage, MessagesQuery
from pgque.core.held import HeldLeases
from pgque.core.history import HistoryQuery, HistorySetting
from pgque.core.live_workers import WorkerBeat
from pgque.core.models import (
    Capabilities,
    DeadLetter,
    Event,
    GroupInfo,
    GroupStateName,
    HistoryRecord,
    KeyInfo,
    KeyPolicy,
    Lease,
    QueueStats,
    ScheduledMessage,
    SettleResult,
    WorkerInfo,
)
from pgque.core.validation import CheckedSettlement

__all__ = [
    "AsyncDriver",
    "AsyncStoreDriver",
    "AsyncWakeupsDriver",
    "AsyncFairnessDriver",
    "AsyncHistoryDriver",
    "AsyncOutboxDriver",
    "AsyncSettleInDriver",
    "BrowseDriver",
    "AsyncBrowseDriver",
    "FairnessDriver",
    "HistoryDriver",
    "OutboxDriver",
    "SettleInDriver",
    "AsyncWorkersDriver",
    "WorkersDriver",
    "StoreDriver",
    "WakeupsDriver",
    "ClaimRequest",
    "Driver",
    "GroupCommand",
    "GROUP_OPERATIONS",
    "Publication",
]

#: The operator commands on one group (:meth:`Driver.command`): ``pause``, ``resume``,
#: ``retry_now``, ``unblock`` (retry the blocked head) and ``drop_head`` (unblock by
#: dead-lettering the head).
GroupCommand = Literal["pause", "resume", "retry_now", "unblock", "drop_head"]

#: What a store runs for each group command: its operation (``drop_head`` is an ``unblock``
#: that dead-letters the head) and, for an ``unblock``, whether it drops the head (None: the
#: operation takes no head).
GROUP_OPERATIONS: dict[GroupCommand, tuple[str, bool | None]] = {
    "pause": ("pause", None),
    "resume": ("resume", None),
    "retry_now": ("retry_now", None),
    "unblock": ("unblock", False),
    "drop_head": ("unblock", True),
}


@dataclass(frozen=True, slots=True)
class Publication:
    """One checked message to append: its group, its event and the event's JSON text, and
    the fairness key its group takes if the message is the group's first (``None``: the
    default key; only a driver with ``Capabilities.fairness`` is given one)."""

    group_id: str
    event: Event
    text: str
    fairness_key: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """A checked claim: up to *n* heads of distinct groups, leased for *visibility* seconds,
    of priority >= *min_priority*, lease *i* labelled ``holders[i]`` (``len(holders) == n``)."""

    n: int
    visibility: float
    min_priority: int
    holders: list[str | None]


class Driver(Protocol):
    """The primitives of one queue on one store (blocking); see the module's docstring."""

    @property
    def backend(self) -> str:
        """The first part of every lease's ``origin`` (``postgresql``, ``redis``, ``memory``)."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What this backend supports."""
        ...

    def open(self) -> str:
        """Connect (idempotent) and return the store's identity, every lease's ``origin``."""
        ...

    def publish(
        self, items: Sequence[Publication], priority: int, delay: float, now: float | None
    ) -> list[int]:
        """Append *items* atomically, in order (scheduled when *delay* > 0); return their ids."""
        ...

    def settle_and_claim(
        self,
        settlements: Sequence[CheckedSettlement],
        claim: ClaimRequest,
        now: float | None,
    ) -> SettleResult:
        """Apply *settlements* in order, each fenced, then lease as *claim* asks: one atomic
        step. Every lease returned carries this driver's queue and store origin."""
        ...

    def extend(self, lease: Lease, visibility: float, now: float | None) -> float | None:
        """Renew a held lease; return its new expiry (epoch seconds) or None if not held."""
        ...

    def cancel(self, message_id: int, now: float | None) -> bool:
        """Drop a scheduled message not yet due; True if dropped."""
        ...

    def scheduled(self, limit: int, after: int | None, now: float | None) -> list[ScheduledMessage]:
        """Up to *limit* scheduled messages not due yet, in id order, after id *after*."""
        ...

    def publish_tick(
        self, entry: str, tick: float, item: Publication, priority: int, now: float | None
    ) -> int | None:
        """Append *item* as tick *tick* of *entry* unless that tick (or a later) was; its id."""
        ...

    def last_tick(self, entry: str) -> float | None:
        """The latest tick of *entry* recorded by :meth:`publish_tick`, or None."""
        ...

    def dead_letters(self, limit: int, after: int | None) -> list[DeadLetter]:
        """Up to *limit* dead letters in id order, after id *after*."""
        ...

    def redrive(
        self, ids: list[int] | None, in_place: bool, retry_now: bool, now: float | None
    ) -> int:
        """Return dead letters (all when *ids* is None) to their groups; how many."""
        ...

    def delete_dead_letters(self, ids: list[int]) -> int:
        """Delete these dead letters; how many existed."""
        ...

    def group(self, group_id: str, now: float | None) -> GroupInfo | None:
        """One group, or None."""
        ...

    def groups(
        self,
        state: GroupStateName | None,
        limit: int,
        after: str | None,
        now: float | None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        """A keyset page of groups in byte order of id (only ids starting with *prefix*)."""
        ...

    def oldest_groups(
        self, state: GroupStateName | None, limit: int, now: float | None
    ) -> list[GroupInfo]:
        """Up to *limit* groups holding a message, the oldest head first."""
        ...

    def command(
        self, group_id: str, command: GroupCommand, head: int | None, now: float | None
    ) -> bool:
        """Apply an operator *command* to one group (*head*: only if that is its head)."""
        ...

    def stats(self, now: float | None) -> QueueStats:
        """The queue's counts."""
        ...

    def close(self) -> None:
        """Release what the driver opened; idempotent."""
        ...


class AsyncDriver(Protocol):
    """The primitives of one queue on one store (asyncio): :class:`Driver` with ``async``."""

    @property
    def backend(self) -> str:
        """The first part of every lease's ``origin``."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What this backend supports."""
        ...

    async def open(self) -> str:
        """Connect (idempotent) and return the store's identity, every lease's ``origin``."""
        ...

    async def publish(
        self, items: Sequence[Publication], priority: int, delay: float, now: float | None
    ) -> list[int]:
        """See :meth:`Driver.publish`."""
        ...

    async def settle_and_claim(
        self,
        settlements: Sequence[CheckedSettlement],
        claim: ClaimRequest,
        now: float | None,
    ) -> SettleResult:
        """See :meth:`Driver.settle_and_claim`."""
        ...

    async def extend(self, lease: Lease, visibility: float, now: float | None) -> float | None:
        """See :meth:`Driver.extend`."""
        ...

    async def cancel(self, message_id: int, now: float | None) -> bool:
        """See :meth:`Driver.cancel`."""
        ...

    async def scheduled(
        self, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        """See :meth:`Driver.scheduled`."""
        ...

    async def publish_tick(
        self, entry: str, tick: float, item: Publication, priority: int, now: float | None
    ) -> int | None:
        """See :meth:`Driver.publish_tick`."""
        ...

    async def last_tick(self, entry: str) -> float | None:
        """See :meth:`Driver.last_tick`."""
        ...

    async def dead_letters(self, limit: int, after: int | None) -> list[DeadLetter]:
        """See :meth:`Driver.dead_letters`."""
        ...

    async def redrive(
        self, ids: list[int] | None, in_place: bool, retry_now: bool, now: float | None
    ) -> int:
        """See :meth:`Driver.redrive`."""
        ...

    async def delete_dead_letters(self, ids: list[int]) -> int:
        """See :meth:`Driver.delete_dead_letters`."""
        ...

    async def group(self, group_id: str, now: float | None) -> GroupInfo | None:
        """See :meth:`Driver.group`."""
        ...

    async def groups(
        self,
        state: GroupStateName | None,
        limit: int,
        after: str | None,
        now: float | None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        """See :meth:`Driver.groups`."""
        ...

    async def oldest_groups(
        self, state: GroupStateName | None, limit: int, now: float | None
    ) -> list[GroupInfo]:
        """See :meth:`Driver.oldest_groups`."""
        ...

    async def command(
        self, group_id: str, command: GroupCommand, head: int | None, now: float | None
    ) -> bool:
        """See :meth:`Driver.command`."""
        ...

    async def stats(self, now: float | None) -> QueueStats:
        """See :meth:`Driver.stats`."""
        ...

    async def close(self) -> None:
        """See :meth:`Driver.close`."""
        ...


class StoreDriver(Driver, Protocol):
    """A driver that also tells its store's time, lists its queues and purges one."""

    def server_time(self) -> float:
        """The store's clock now, epoch seconds."""
        ...

    def queues(self) -> list[str]:
        """The queues of the store holding messages or dead letters, in byte order."""
        ...

    def purge(self) -> None:
        """Delete everything of this queue."""
        ...


class WakeupsDriver(Driver, Protocol):
    """A driver whose store tells it when messages may have become claimable."""

    def wait_for_messages(self, timeout: float, now: float | None) -> bool:
        """Wait up to *timeout* seconds for news of claimable messages; True if some came."""
        ...


class AsyncStoreDriver(AsyncDriver, Protocol):
    """:class:`StoreDriver` (asyncio)."""

    async def server_time(self) -> float:
        """See :meth:`StoreDriver.server_time`."""
        ...

    async def queues(self) -> list[str]:
        """See :meth:`StoreDriver.queues`."""
        ...

    async def purge(self) -> None:
        """See :meth:`StoreDriver.purge`."""
        ...


class AsyncWakeupsDriver(AsyncDriver, Protocol):
    """:class:`WakeupsDriver` (asyncio)."""

    async def wait_for_messages(self, timeout: float, now: float | None) -> bool:
        """See :meth:`WakeupsDriver.wait_for_messages`."""
        ...


class OutboxDriver(Driver, Protocol):
    """A driver that appends inside the caller's open transaction (the transactional outbox,
    ``Capabilities.transactional_publish``)."""

    def publish_on(
        self,
        connection: object,
        items: Sequence[Publication],
        priority: int,
        delay: float,
        now: float | None,
    ) -> list[int]:
        """As :meth:`Driver.publish`, on the caller's *connection*, inside its transaction."""
        ...


class AsyncOutboxDriver(AsyncDriver, Protocol):
    """:class:`OutboxDriver` (asyncio)."""

    async def publish_on(
        self,
        connection: object,
        items: Sequence[Publication],
        priority: int,
        delay: float,
        now: float | None,
    ) -> list[int]:
        """See :meth:`OutboxDriver.publish_on`."""
        ...


#: The type of a store's connections (a settle_in driver's).
C = TypeVar("C")


class SettleInDriver(Driver, Protocol[C]):
    """A driver that settles a lease inside the caller's transaction (``settle_in``,
    ``Capabilities.settle_in``; :class:`~pgque.core.settle_in.SettleIn`) on its connections
    of type *C*. :attr:`held` answers the worker's own settlement of a lease settled so."""

    held: HeldLeases

    def connection(self) -> AbstractContextManager[C]:
        """Lend one of the driver's own connections."""
        ...

    def caller_connection(self, connection: object) -> C:
        """Return the connection under the caller's *connection* (InvalidInput if none)."""
        ...

    def transaction(self, connection: C) -> AbstractContextManager[Any]:
        """Begin a transaction on *connection* (a savepoint inside one already open)."""
        ...

    def hold_on(
        self, connection: C, lease: Lease, visibility: float, now: float | None
    ) -> float | None:
        """Extend *lease* on *connection*, holding its group until the transaction ends; the
        new expiry, None if the lease is no longer the group's."""
        ...

    def settle_on(self, connection: C, item: CheckedSettlement, now: float | None) -> bool:
        """Apply *item* on *connection*, inside its transaction; False if the lease was lost."""
        ...


class AsyncSettleInDriver(AsyncDriver, Protocol[C]):
    """:class:`SettleInDriver` (asyncio)."""

    held: HeldLeases

    def connection(self) -> AbstractAsyncContextManager[C]:
        """See :meth:`SettleInDriver.connection`."""
        ...

    async def caller_connection(self, connection: object) -> C:
        """See :meth:`SettleInDriver.caller_connection`."""
        ...

    def transaction(self, connection: C) -> AbstractAsyncContextManager[Any]:
        """See :meth:`SettleInDriver.transaction`."""
        ...

    async def hold_on(
        self, connection: C, lease: Lease, visibility: float, now: float | None
    ) -> float | None:
        """See :meth:`SettleInDriver.hold_on`."""
        ...

    async def settle_on(self, connection: C, item: CheckedSettlement, now: float | None) -> bool:
        """See :meth:`SettleInDriver.settle_on`."""
        ...


class FairnessDriver(Driver, Protocol):
    """A driver with fair shares between keys (``Capabilities.fairness``; docs/fairness.md).

    *key* ``""`` is the default key (groups published without one); ``None`` in a policy call
    is the default policy of the keys that have none.
    """

    def set_key_policy(self, key: str | None, policy: KeyPolicy) -> None:
        """Store *policy* for *key* (every worker's next claim obeys it)."""
        ...

    def key_policy(self, key: str | None) -> KeyPolicy | None:
        """*key*'s own stored policy (``None``: the default policy), or None if it has none."""
        ...

    def delete_key_policy(self, key: str | None) -> bool:
        """Drop *key*'s own policy; True if it had one."""
        ...

    def key_info(self, key: str, now: float | None) -> KeyInfo | None:
        """*key* as :meth:`keys` shows it, or None if it has no group and no policy."""
        ...

    def keys(self, limit: int, after: str | None, now: float | None) -> list[KeyInfo]:
        """Up to *limit* keys with groups or a policy of their own, after *after* in UTF-8 byte
        order (the default key ``""`` first)."""
        ...


class AsyncFairnessDriver(AsyncDriver, Protocol):
    """The asyncio twin of :class:`FairnessDriver`."""

    async def set_key_policy(self, key: str | None, policy: KeyPolicy) -> None:
        """Store *policy* for *key* (every worker's next claim obeys it)."""
        ...

    async def key_policy(self, key: str | None) -> KeyPolicy | None:
        """*key*'s own stored policy (``None``: the default policy), or None if it has none."""
        ...

    async def delete_key_policy(self, key: str | None) -> bool:
        """Drop *key*'s own policy; True if it had one."""
        ...

    async def key_info(self, key: str, now: float | None) -> KeyInfo | None:
        """*key* as :meth:`keys` shows it, or None if it has no group and no policy."""
        ...

    async def keys(self, limit: int, after: str | None, now: float | None) -> list[KeyInfo]:
        """Up to *limit* keys with groups or a policy of their own, after *after* in UTF-8 byte
        order (the default key ``""`` first)."""
        ...


class HistoryDriver(Driver, Protocol):
    """A driver that keeps job history (``Capabilities.history``; docs/history.md)."""

    def set_history(self, setting: HistorySetting) -> None:
        """Store the queue's history setting: a retention (record from now on) or ``"off"``."""
        ...

    def history(self, query: HistoryQuery, now: float | None) -> list[HistoryRecord]:
        """The records *query* asks for, newest first, none older than the retention."""
        ...


class AsyncHistoryDriver(AsyncDriver, Protocol):
    """The asyncio twin of :class:`HistoryDriver`."""

    async def set_history(self, setting: HistorySetting) -> None:
        """Store the queue's history setting: a retention (record from now on) or ``"off"``."""
        ...

    async def history(self, query: HistoryQuery, now: float | None) -> list[HistoryRecord]:
        """The records *query* asks for, newest first, none older than the retention."""
        ...


class BrowseDriver(Driver, Protocol):
    """A driver that lists the messages behind their groups' heads (``Capabilities.browse``;
    :mod:`pgque.core.browse` gives the paging and preview rules)."""

    def messages(self, query: MessagesQuery, now: float | None) -> MessagePage:
        """The page *query* asks for (due scheduled messages joined first)."""
        ...

    def message(self, message_id: int, now: float | None) -> MessageInfo | None:
        """One message in a group or scheduled, or None."""
        ...

    def group_scheduled(
        self, group_id: str, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        """Up to *limit* of *group_id*'s scheduled messages not due at *now*, id > *after*."""
        ...


class AsyncBrowseDriver(AsyncDriver, Protocol):
    """The asyncio twin of :class:`BrowseDriver`."""

    async def messages(self, query: MessagesQuery, now: float | None) -> MessagePage:
        """The page *query* asks for (due scheduled messages joined first)."""
        ...

    async def message(self, message_id: int, now: float | None) -> MessageInfo | None:
        """One message in a group or scheduled, or None."""
        ...

    async def group_scheduled(
        self, group_id: str, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        """Up to *limit* of *group_id*'s scheduled messages not due at *now*, id > *after*."""


class WorkersDriver(Driver, Protocol):
    """A driver that keeps the queue's live workers (``Capabilities.workers``;
    docs/workers.md)."""

    def heartbeat(self, beat: WorkerBeat, now: float | None) -> None:
        """Upsert the worker's row at *now* (None: the store's clock): a new row starts now;
        its slots are held since now minus their time held. Removes the rows of workers whose
        last heartbeat is older than ``PRUNE_AFTER_S``."""
        ...

    def goodbye(self, worker: str) -> bool:
        """Delete the worker's row; False when there was none."""
        ...

    def workers(self, include_gone: bool, now: float | None) -> list[WorkerInfo]:
        """The queue's workers by id (alive only unless *include_gone*), each with the
        unexpired leases held in its name."""
        ...


class AsyncWorkersDriver(AsyncDriver, Protocol):
    """The asyncio twin of :class:`WorkersDriver`."""

    async def heartbeat(self, beat: WorkerBeat, now: float | None) -> None:
        """Upsert the worker's row at *now*; as :meth:`WorkersDriver.heartbeat`."""
        ...

    async def goodbye(self, worker: str) -> bool:
        """Delete the worker's row; False when there was none."""
        ...

    async def workers(self, include_gone: bool, now: float | None) -> list[WorkerInfo]:
        """The queue's workers by id; as :meth:`WorkersDriver.workers`."""
        ...
