"""The asyncio front door: :class:`AsyncClient`, the contract written once over a driver."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

from typing_extensions import Self

from pgque.core.browse import MessageInfo, MessagePage, check_group_prefix, check_messages_query
from pgque.core.bulk import (
    MAX_BULK,
    SCAN_ITEMS,
    BulkGroupAction,
    BulkResult,
    DeadLetterSelection,
    GroupSelection,
    check_dead_letter_selection,
    check_group_selection,
)
from pgque.core.client._checks import ClientChecks
from pgque.core.contract import AsyncSettleTransaction, ErrorLike
from pgque.core.driver import (
    AsyncBrowseDriver,
    AsyncDriver,
    AsyncFairnessDriver,
    AsyncHistoryDriver,
    AsyncOutboxDriver,
    AsyncSettleInDriver,
    AsyncStoreDriver,
    AsyncWakeupsDriver,
    AsyncWorkersDriver,
    ClaimRequest,
    GroupCommand,
    Publication,
)
from pgque.core.errors import InvalidInput, Unsupported
from pgque.core.fairness import (
    check_keys_page,
    check_policy_key,
    key_policy,
)
from pgque.core.history import HistoryRetention, check_history_option, check_history_query
from pgque.core.live_workers import WorkerBeat, check_worker_beat, check_worker_id
from pgque.core.models import (
    DeadLetter,
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
from pgque.core.settle_in import AsyncSettleIn
from pgque.core.tracing import traced_publish
from pgque.core.validation import (
    MAX_GROUPS_PAGE,
    CheckedSettlement,
    check_after_id,
    check_batch_size,
    check_claim_count,
    check_entry_name,
    check_group_id,
    check_groups_page,
    check_head,
    check_holder,
    check_holders,
    check_ids,
    check_limit,
    check_message_id,
    check_oldest_groups,
    check_priority,
    check_scheduled_page,
    check_seconds,
    check_store,
    check_tick,
)

__all__ = [
    "AsyncBrowseClient",
    "AsyncClient",
    "AsyncFairnessClient",
    "AsyncHistoryClient",
    "AsyncOutboxClient",
    "AsyncSettleInClient",
    "AsyncStoreClient",
    "AsyncWakeupsClient",
    "AsyncWorkersClient",
]

#: The type of a store's connections (a settle_in driver's).
C = TypeVar("C")

#: A claim of nothing: what a settlement alone rides on.
_NO_CLAIM = ClaimRequest(0, 0.0, 0, [])


class AsyncClient(ClientChecks[AsyncDriver]):
    """A queue over an :class:`~pgque.core.AsyncDriver` (asyncio API): an AsyncTransport.

    Every backend's transport class is one of these: the front door checks each argument
    before any I/O (InvalidInput), turns the conveniences into the driver's primitives
    (``claim`` is a ``claim_many`` of one, ``ack``/``nack``/``release``/``dead_letter`` are
    settlements), checks that a lease is this queue's and this store's, and traces publishes.
    *options* are the validated options every transport takes (queue, max_attempts,
    on_exhausted, clock, max_event_bytes). docs/backends.md shows how to write a driver.
    """

    async def open(self) -> None:
        """Connect and check (or install) what the store needs; idempotent, and implicit in
        the first operation. Raises TransportClosed, ConnectionLost or SchemaMismatch."""
        self._check_open()
        await self._store_origin()

    async def _store_origin(self) -> str:
        """The store's identity, every lease's ``origin`` (opens the driver the first time)."""
        if self._origin is None:
            self._origin = await self._driver.open()
        return self._origin

    async def _from_here(self, leases: Iterable[Lease]) -> None:
        """Raise InvalidInput unless every lease was issued by this store (opens to learn it)."""
        origin: str | None = None
        for lease in leases:
            if origin is None:
                origin = await self._store_origin()
            check_store(lease, origin)

    async def _settle(self, settlement: Settlement) -> bool:
        """Apply one settlement (its lease checked by :meth:`_lease` already), claiming none."""
        self._check_open()
        now = self._now()
        if settlement.outcome in ("ack", "release"):
            # Nothing to check but the lease (the hot path: no list, no error, no delay).
            checked = [CheckedSettlement(settlement.lease, settlement.outcome, 0.0, "", None)]
        else:
            checked = self._settlements([settlement], now)
        check_store(settlement.lease, await self._store_origin())
        result = await self._driver.settle_and_claim(checked, _NO_CLAIM, now)
        return result.settled[0]

    # -- publishing ---------------------------------------------------------------------

    @traced_publish
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

        *priority* (0-4) is fixed by a group's first publish while it has messages. With
        *delay* > 0 (seconds, at most a year) the message is scheduled: it joins the tail of
        its group when *delay* has passed by the store's clock, keeping the returned id; until
        then no claim sees it and it does not hold up its group (docs/scheduling.md).
        *fairness_key* (a tenant, 1-200 UTF-8 bytes) is fixed like the priority: claims share
        the workers between keys first, then between a key's groups (docs/fairness.md); a
        backend without ``Capabilities.fairness`` raises ConfigurationError for one.
        Raises InvalidInput for a bad group id, priority, delay, key or event (before any
        I/O); ConnectionLost or PgqueError when the store fails.
        """
        batch, checked_priority, wait = self._checked_one(
            group_id, event, priority, delay, fairness_key
        )
        return (await self._driver.publish(batch, checked_priority, wait, self._now()))[0]

    @traced_publish
    async def publish_many(
        self,
        items: Iterable[tuple[str, Event]],
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
    ) -> list[int]:
        """Append many (group_id, event) pairs atomically, in order; return their ids.

        With *delay* > 0 every item is scheduled with the same due time, and *fairness_key*
        applies to every item, as :meth:`publish` says. Raises InvalidInput for a bad item,
        priority, delay or key (before any I/O).
        """
        batch, checked_priority, wait = self._checked_batch(items, priority, delay, fairness_key)
        if not batch:
            return []
        return await self._driver.publish(batch, checked_priority, wait, self._now())

    async def cancel(self, message_id: int) -> bool:
        """Drop a scheduled message that is not due yet; True if it was dropped.

        False when it is due (joined or not), delivered, unknown, or was published without a
        delay. Raises InvalidInput for an id that is not a positive int.
        """
        self._check_open()
        return await self._driver.cancel(check_message_id(message_id), self._now())

    async def scheduled(
        self, *, limit: int = 100, after: int | None = None
    ) -> list[ScheduledMessage]:
        """Up to *limit* (1-1,000) scheduled messages not due yet, in id order, after id *after*.

        A stored event that is not Event JSON shows the kind ``pgque.undecodable``.
        """
        self._check_open()
        checked_limit, checked_after = check_scheduled_page(limit, after)
        return await self._driver.scheduled(checked_limit, checked_after, self._now())

    @traced_publish
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
        """Publish *event* as tick *tick* (epoch seconds) of the schedule entry *entry*.

        It is appended only if no tick of *entry* at or after *tick* was published to this
        queue; that check, recording *tick* as the entry's last one, and the append are one
        atomic step, so of several schedulers publishing one tick exactly one appends. Returns
        the message id, or None when the tick (or a later one) was already published.
        *fairness_key* is as :meth:`publish` has it.
        """
        self._check_open()
        checked_entry = check_entry_name(entry)
        checked_tick = check_tick(tick)
        item = self._publication(group_id, event, self._fairness_key(fairness_key))
        checked_priority = check_priority(priority)
        return await self._driver.publish_tick(
            checked_entry, checked_tick, item, checked_priority, self._now()
        )

    async def last_tick(self, entry: str) -> float | None:
        """The latest tick of *entry* published by :meth:`publish_tick`, or None."""
        self._check_open()
        return await self._driver.last_tick(check_entry_name(entry))

    # -- claiming and settling ----------------------------------------------------------

    async def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Lease | None:
        """Lease the head of the longest-unserved claimable group, or return None.

        *holder* (at most 200 characters) labels who holds the lease, for
        ``GroupInfo.lease_holder``; the Worker passes ``host:pid:slot``.
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
        """Lease the heads of up to *n* distinct groups (never two of one group).

        A group's head is its lowest message id; paused groups are passed over. A head whose
        stored event cannot be decoded is dead-lettered (reason ``undecodable event: …``) and
        the others are returned. Raises InvalidInput for a bad n, visibility, min_priority or
        holder (before any I/O); ConnectionLost or PgqueError when the store fails.
        """
        self._check_open()
        checked_n = check_batch_size(n)
        claim = ClaimRequest(
            checked_n,
            check_seconds(visibility, "visibility"),
            check_priority(min_priority, "min_priority"),
            [check_holder(holder)] * checked_n,
        )
        result = await self._driver.settle_and_claim([], claim, self._now())
        return result.leases

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
        then up to *n* (0-10,000) heads of distinct claimable groups are leased as
        ``claim_many`` would; *holder* labels them all, or, a list of *n* labels, lease *i*
        with label *i*. A settlement that fails its fence never stops the claim, and an empty
        claim never undoes a settlement; the call as a whole is one transaction (one script on
        Redis), so a lost connection leaves either all of it or none. At most 10,000
        settlements; all leases must be this queue's. Raises InvalidInput before any I/O for a
        bad settlement, *n*, *visibility*, *min_priority* or *holder*.
        """
        self._check_open()
        now = self._now()
        checked = self._settlements(settlements, now)
        checked_n = check_claim_count(n)
        claim = ClaimRequest(
            checked_n,
            check_seconds(visibility, "visibility"),
            check_priority(min_priority, "min_priority"),
            check_holders(holder, checked_n),
        )
        await self._from_here(item.lease for item in checked)
        return await self._driver.settle_and_claim(checked, claim, now)

    async def ack(self, lease: Lease) -> bool:
        """Remove the leased message and free its group; False if the lease is not held."""
        return await self._settle(Settlement.ack(self._lease(lease)))

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases in one call; one result per lease, in order.

        Raises InvalidInput for anything but a sequence of this queue's leases.
        """
        self._check_open()
        given: object = leases
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
            raise InvalidInput(f"leases must be a sequence of Lease, not {type(given).__name__}")
        checked = [Settlement.ack(self._lease(lease)) for lease in leases]
        if not checked:
            return []
        result = await self.settle_and_claim(checked, 0)
        return result.settled

    async def nack(
        self, lease: Lease, *, delay: float = 0.0, error: ErrorLike | None = None
    ) -> bool:
        """Give the message back (the attempt counts); with *delay* > 0 park its group.

        *error* (an exception, a string or an ErrorInfo) becomes the group's ``last_error``
        and, should the message be dead-lettered later, its ``DeadLetter.error``; without it
        ``last_error`` stays as it was. False if the lease is not held.
        """
        return await self._settle(Settlement.nack(self._lease(lease), delay=delay, error=error))

    async def release(self, lease: Lease) -> bool:
        """Give the message back for immediate redelivery without counting the attempt.

        For a graceful shutdown: its group is claimable at once (behind the groups served
        earlier, as after a nack). Fenced like ``ack``: False if the lease is not held.
        """
        return await self._settle(Settlement.release(self._lease(lease)))

    async def dead_letter(
        self, lease: Lease, reason: str, *, error: ErrorLike | None = None
    ) -> bool:
        """Move the leased message to the dead-letter store; its group continues.

        *error* is kept as ``DeadLetter.error`` (else the last error a nack recorded).
        """
        settlement = Settlement.dead_letter(self._lease(lease), reason, error=error)
        return await self._settle(settlement)

    async def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew a held lease to expire *visibility* seconds from now; None if not held."""
        self._check_open()
        checked = self._lease(lease)
        seconds = check_seconds(visibility, "visibility")
        await self._from_here([checked])
        until = await self._driver.extend(checked, seconds, self._now())
        return None if until is None else checked.model_copy(update={"expires_at": until})

    # -- dead letters -------------------------------------------------------------------

    async def dead_letters(self, limit: int = 100, *, after: int | None = None) -> list[DeadLetter]:
        """List up to *limit* dead letters in id order (oldest first), those after id *after*.

        A dead letter whose stored text is not Event JSON is shown with a stand-in event of kind
        ``pgque.undecodable`` whose data holds the text (cut to 4,096 characters) and the error;
        ``redrive`` publishes the stored text itself.
        """
        self._check_open()
        return await self._driver.dead_letters(check_limit(limit), check_after_id(after))

    async def redrive(
        self, ids: Sequence[int] | None = None, *, in_place: bool = True, retry_now: bool = False
    ) -> int:
        """Return dead letters (all when *ids* is None) to their groups; return how many.

        In place (the default) a dead letter goes back with its original message id, ahead
        of every later message of its group not yet delivered (a message in flight finishes
        first), and starts again at attempt 1, keeping its error as its ``last_error``; a
        missing group is created with the dead letter's priority. ``in_place=False``
        publishes it anew at the tail. A group waiting out a retry delay keeps waiting unless
        *retry_now* (then, as :meth:`retry_now`, it is claimable at once).
        """
        self._check_open()
        for name, flag in (("in_place", in_place), ("retry_now", retry_now)):
            if not isinstance(flag, bool):
                raise InvalidInput(f"{name} must be a bool, not {flag!r}")
        return await self._driver.redrive(check_ids(ids), in_place, retry_now, self._now())

    async def delete_dead_letters(self, ids: Sequence[int]) -> int:
        """Delete the dead letters with these ids; return how many existed and were deleted.

        Raises InvalidInput when *ids* is not a sequence of ints (None included).
        """
        self._check_open()
        if ids is None:
            raise InvalidInput("ids must be a sequence of ints, not None")
        checked = check_ids(ids)
        return await self._driver.delete_dead_letters(checked or [])

    # -- groups -------------------------------------------------------------------------

    async def _command(self, group_id: str, command: GroupCommand, head: int | None) -> bool:
        self._check_open()
        return await self._driver.command(check_group_id(group_id), command, head, self._now())

    async def unblock(
        self, group_id: str, *, drop_head: bool = False, head: int | None = None
    ) -> bool:
        """Release a group blocked by ``on_exhausted="block"``.

        The head is retried with a fresh attempt count, or dead-lettered when *drop_head*.
        With *head* (a message id), only if that message is still the group's head.
        Returns False if the group is not blocked (or its head is another message).
        """
        checked_head = check_head(head)
        return await self._command(group_id, "drop_head" if drop_head else "unblock", checked_head)

    async def retry_now(self, group_id: str) -> bool:
        """End the retry delay the group is waiting out: its head is claimable at once, its
        attempt count and last error kept (a paused group stays paused).

        Returns False if the group is not waiting for a retry (no such group, ready, leased
        or blocked).
        """
        return await self._command(group_id, "retry_now", None)

    async def pause(self, group_id: str) -> bool:
        """Hold *group_id*: no claim leases it until :meth:`resume` (a lease out finishes).

        Publishes still append; an empty paused group is kept; a group that does not exist
        yet is created paused (priority 0). False if it was already paused.
        """
        return await self._command(group_id, "pause", None)

    async def resume(self, group_id: str) -> bool:
        """Lift the hold of :meth:`pause`; False if the group is not paused.

        A resumed group without messages is removed; a message that fell due meanwhile
        joins it first.
        """
        return await self._command(group_id, "resume", None)

    # -- bulk actions (pgque.core.bulk) ------------------------------------------------

    async def _selected_groups(
        self, selection: GroupSelection, now: float | None
    ) -> tuple[list[str], str | None]:
        """The ids of the groups *selection* chooses now, and where a next call goes on."""
        if selection.group_ids is not None:
            chosen: list[str] = []
            start = None if selection.after is None else selection.after.encode()
            for group_id in selection.group_ids:
                if start is not None and group_id.encode() <= start:
                    continue  # keyset paging applies to a list as to a filter
                info = await self._driver.group(group_id, now)
                if info is not None and selection.matches(info):
                    chosen.append(group_id)
            return chosen, None
        # The store filters by state and prefix (an index range); only a key is checked here,
        # so only then can a page hold groups that do not match.
        by_key = selection.key is not None
        prefix = selection.prefix or None  # "" is every group: no range at all
        chosen, after, examined = [], selection.after, 0
        while len(chosen) < selection.limit and examined < SCAN_ITEMS:
            want = selection.limit - len(chosen)
            size = min(MAX_GROUPS_PAGE if by_key else want, MAX_GROUPS_PAGE, SCAN_ITEMS - examined)
            if prefix is None:
                page = await self._driver.groups(selection.state, size, after, now)
            else:
                page = await self._driver.groups(selection.state, size, after, now, prefix)
            taken = 0
            for info in page:
                taken += 1
                after = info.group_id
                if selection.matches(info):
                    chosen.append(info.group_id)
                    if len(chosen) == selection.limit:
                        break
            examined += taken
            if len(page) < size and taken == len(page):
                return chosen, None  # the store has no more
        return chosen, after

    async def _bulk_groups(
        self,
        action: BulkGroupAction,
        group_ids: Sequence[str] | None,
        state: GroupStateName | None,
        key: str | None,
        prefix: str | None,
        limit: int,
        after: str | None,
        dry_run: bool,
    ) -> BulkResult[str]:
        self._check_open()
        selection = check_group_selection(
            group_ids=group_ids, state=state, key=key, prefix=prefix, limit=limit, after=after
        )
        if not isinstance(dry_run, bool):
            raise InvalidInput(f"dry_run must be a bool, not {dry_run!r}")
        now = self._now()
        chosen, next_after = await self._selected_groups(selection, now)
        changed = 0
        if not dry_run:
            for group_id in chosen:
                if await self._driver.command(group_id, action, None, now):
                    changed += 1
        return BulkResult[str](
            action=action,
            matched=len(chosen),
            changed=changed,
            ids=chosen,
            next_after=next_after,
            dry_run=dry_run,
        )

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
        """Pause the groups selected by *group_ids* and/or the filter, as :meth:`pause` each.

        *group_ids*: a list of at most *limit* existing groups (an id with no group is not
        created; one drained away between this call's read and its pause is, empty).
        Filter: *state* (``ready``, ``leased``, ``parked``, ``blocked``, ``paused``), *key* (a
        fairness key, ``""`` for the groups published without one), *prefix* of the group id
        (``""``: every group); with *group_ids* too, only the listed groups that pass it. At
        most *limit* (1-1,000) groups per call, in byte order of id, after *after*; a key
        filter examines at most 10,000 groups per call. ``next_after`` of the result goes on
        from where the call stopped. *dry_run*: select only, change nothing (a preview).
        Returns how many matched and how many it changed. Raises InvalidInput for a bad
        argument, or when neither *group_ids* nor a filter is given.
        """
        return await self._bulk_groups(
            "pause", group_ids, state, key, prefix, limit, after, dry_run
        )

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
        """Resume the selected groups, as :meth:`resume` each; only paused ones change.

        Selection, filter, bound and result as :meth:`bulk_pause`.
        """
        return await self._bulk_groups(
            "resume", group_ids, state, key, prefix, limit, after, dry_run
        )

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
        """End the retry delay of the selected groups, as :meth:`retry_now` each; only the
        ones waiting out a delay change (``state="parked"`` selects exactly those).

        Selection, filter, bound and result as :meth:`bulk_pause`.
        """
        return await self._bulk_groups(
            "retry_now", group_ids, state, key, prefix, limit, after, dry_run
        )

    async def _selected_dead_letters(
        self, selection: DeadLetterSelection
    ) -> tuple[list[int], int | None]:
        """The ids of the dead letters *selection* chooses now, and where a next call goes on."""
        if selection.ids is not None:
            chosen: list[int] = []
            for letter_id in selection.ids:
                if selection.after is not None and letter_id <= selection.after:
                    continue
                page = await self._driver.dead_letters(1, letter_id - 1)
                if page and page[0].id == letter_id and selection.matches(page[0]):
                    chosen.append(letter_id)
            return chosen, None
        chosen, after, examined = [], selection.after, 0
        while len(chosen) < selection.limit and examined < SCAN_ITEMS:
            size = min(MAX_GROUPS_PAGE, SCAN_ITEMS - examined)
            page = await self._driver.dead_letters(size, after)
            taken = 0
            for letter in page:
                taken += 1
                after = letter.id
                if selection.matches(letter):
                    chosen.append(letter.id)
                    if len(chosen) == selection.limit:
                        break
            examined += taken
            if len(page) < size and taken == len(page):
                return chosen, None  # no more dead letters
        return chosen, after

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
        """Redrive the dead letters selected by *ids* and/or the filter, as :meth:`redrive`.

        *ids*: at most *limit* dead letter ids. Filter: *prefix* of the group id (``""``:
        every dead letter), *kind* of the event; with *ids* too, only the listed ones that
        pass it. At most *limit* (1-1,000) per call, in id order after *after*, examining at
        most 10,000 dead letters per call; ``next_after`` of the result goes on from there.
        *in_place* and *retry_now* are :meth:`redrive`'s. *dry_run*: select only (a
        preview). Raises InvalidInput for a bad argument, or when neither *ids* nor a filter
        is given.
        """
        for name, flag in (("in_place", in_place), ("retry_now", retry_now)):
            if not isinstance(flag, bool):
                raise InvalidInput(f"{name} must be a bool, not {flag!r}")
        return await self._bulk_dead_letters(
            "redrive", ids, prefix, kind, limit, after, dry_run, in_place, retry_now
        )

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
        """Delete the dead letters selected by *ids* and/or the filter.

        Selection, filter, bound and result as :meth:`bulk_redrive`.
        """
        return await self._bulk_dead_letters(
            "delete", ids, prefix, kind, limit, after, dry_run, True, False
        )

    async def _bulk_dead_letters(
        self,
        action: str,
        ids: Sequence[int] | None,
        prefix: str | None,
        kind: str | None,
        limit: int,
        after: int | None,
        dry_run: bool,
        in_place: bool,
        retry_now: bool,
    ) -> BulkResult[int]:
        self._check_open()
        selection = check_dead_letter_selection(
            ids=ids, prefix=prefix, kind=kind, limit=limit, after=after
        )
        if not isinstance(dry_run, bool):
            raise InvalidInput(f"dry_run must be a bool, not {dry_run!r}")
        chosen, next_after = await self._selected_dead_letters(selection)
        changed = 0
        if chosen and not dry_run:
            if action == "redrive":
                changed = await self._driver.redrive(chosen, in_place, retry_now, self._now())
            else:
                changed = await self._driver.delete_dead_letters(chosen)
        return BulkResult[int](
            action=action,
            matched=len(chosen),
            changed=changed,
            ids=chosen,
            next_after=next_after,
            dry_run=dry_run,
        )

    async def group(self, group_id: str) -> GroupInfo | None:
        """Everything about one group at the store's now, or None if there is no such group."""
        self._check_open()
        return await self._driver.group(check_group_id(group_id), self._now())

    async def groups(
        self,
        *,
        state: GroupStateName | None = None,
        limit: int = 100,
        after: str | None = None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups in byte order of id, those after *after*.

        Keyset paging: pass the last ``group_id`` of a page as *after* for the next one.
        With *state*, only groups in that state. With *prefix*, only groups whose id starts
        with it (byte order: a range of ids, never a scan; ``""`` is every group).
        """
        self._check_open()
        checked_state, checked_limit, checked_after = check_groups_page(state, limit, after)
        checked_prefix = check_group_prefix(prefix)
        if checked_prefix is None:
            return await self._driver.groups(
                checked_state, checked_limit, checked_after, self._now()
            )
        return await self._driver.groups(
            checked_state, checked_limit, checked_after, self._now(), checked_prefix
        )

    async def oldest_groups(
        self,
        *,
        limit: int = 10,
        state: GroupStateName | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* (1-1,000) groups that hold a message, the oldest head first.

        Ordered by ``head_enqueued_at``, then by group id in byte order: the groups waiting
        longest for their next message to finish, stuck ones first. With *state*, only groups
        in that state. Exact at any size (no sampling). Raises InvalidInput for a bad state or
        limit.
        """
        self._check_open()
        checked_state, checked_limit = check_oldest_groups(state, limit)
        return await self._driver.oldest_groups(checked_state, checked_limit, self._now())

    async def stats(self) -> QueueStats:
        """Return counts of groups, messages, in-flight, parked, blocked, paused and dead letters.

        Each group counts in at most one of paused, blocked, in_flight and parked.
        """
        self._check_open()
        return await self._driver.stats(self._now())

    # -- lifetime -----------------------------------------------------------------------

    async def close(self) -> None:
        """Release what this transport opened (injected connections stay open). Idempotent."""
        self._closed = True
        await self._driver.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def settle_in(
        self, lease: Lease, connection: Any = None
    ) -> AbstractAsyncContextManager[AsyncSettleTransaction]:
        """Settle *lease* in a transaction of yours, with your writes (docs/transactions.md).

        Only a backend with ``Capabilities.settle_in`` (PostgreSQL) can: this one raises
        Unsupported. Settle with ack, nack, release or dead_letter instead.
        """
        raise Unsupported(
            f"{self._driver.backend} cannot settle a lease in your transaction "
            "(Capabilities.settle_in is False; docs/transactions.md): settle it with ack, "
            "nack, release or dead_letter"
        )


# -- abilities beyond the contract: a transport class adds the ones its driver has ----------


class AsyncOutboxClient(AsyncClient):
    """Adds ``connection=`` to :meth:`publish` and :meth:`publish_many` (the transactional
    outbox, ``Capabilities.transactional_publish``) over a driver that has it."""

    @traced_publish
    async def publish(
        self,
        group_id: str,
        event: Event,
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
        connection: Any = None,
    ) -> int:
        """As :meth:`AsyncClient.publish`; with *connection* (one the store's driver takes:
        for PostgreSQL psycopg's, or a SQLAlchemy session or connection on psycopg 3) it joins
        that connection's open transaction (the transactional outbox): a rollback drops the
        message."""
        batch, checked_priority, wait = self._checked_one(
            group_id, event, priority, delay, fairness_key
        )
        return (await self._append(batch, checked_priority, wait, connection))[0]

    @traced_publish
    async def publish_many(
        self,
        items: Iterable[tuple[str, Event]],
        *,
        priority: int = 0,
        delay: float = 0.0,
        fairness_key: str | None = None,
        connection: Any = None,
    ) -> list[int]:
        """As :meth:`AsyncClient.publish_many`; *connection* as for :meth:`publish`."""
        batch, checked_priority, wait = self._checked_batch(items, priority, delay, fairness_key)
        if not batch:
            return []
        return await self._append(batch, checked_priority, wait, connection)

    async def _append(
        self, batch: list[Publication], priority: int, delay: float, connection: Any
    ) -> list[int]:
        if connection is None:
            return await self._driver.publish(batch, priority, delay, self._now())
        driver = cast(AsyncOutboxDriver, self._driver)
        return await driver.publish_on(connection, batch, priority, delay, self._now())


class AsyncSettleInClient(AsyncClient, Generic[C]):
    """Adds :meth:`settle_in` (``AsyncSupportsSettleIn``, ``Capabilities.settle_in``;
    docs/transactions.md) over a driver that settles in the caller's transaction on its
    connections of type *C*."""

    def settle_in(self, lease: Lease, connection: Any = None) -> AsyncSettleIn[C]:
        """Settle *lease* in a transaction on *connection* (one the store's driver takes: for
        PostgreSQL psycopg's, or a SQLAlchemy session or connection on psycopg 3; the
        transport lends one when None), or in a savepoint of one already open:
        :class:`~pgque.core.AsyncSupportsSettleIn`, docs/transactions.md."""
        checked = self._lease(lease)
        driver = cast(AsyncSettleInDriver[C], self._driver)
        return AsyncSettleIn(driver, checked, connection, self._settlements, self._now)


class AsyncWakeupsClient(AsyncClient):
    """Adds :meth:`wait_for_messages` (``SupportsWakeups``) over a driver that has it."""

    async def wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news of claimable messages; True if some came.

        Idle workers call this instead of sleeping: the store tells the transport when a
        publish, a redrive, an unblock or a nack without delay commits, so the wait ends at
        once. A True may be spurious (the caller claims and finds nothing); False means the
        time passed. The first call returns True as soon as it listens, since a publish just
        before that was not heard. The wait never runs past the due time of the queue's next
        scheduled message. Raises InvalidInput for a bad timeout, TransportClosed,
        ConnectionLost or PgqueError.
        """
        seconds = check_seconds(timeout, "timeout")
        self._check_open()
        driver = cast(AsyncWakeupsDriver, self._driver)
        return await driver.wait_for_messages(seconds, self._now())


class AsyncStoreClient(AsyncClient):
    """Adds :meth:`server_time`, :meth:`queues` and :meth:`purge` over a driver that has them
    (``SupportsServerTime``, ``SupportsQueues``, ``SupportsPurge``)."""

    async def server_time(self) -> float:
        """Return the store's time now, epoch seconds (the injected clock when there is one).
        Raises ConnectionLost or PgqueError."""
        self._check_open()
        now = self._now()
        driver = cast(AsyncStoreDriver, self._driver)
        return now if now is not None else await driver.server_time()

    async def queues(self) -> list[str]:
        """Return the names of every queue in this store that holds messages or dead letters.

        Sorted in byte order. Raises TransportClosed after close(), ConnectionLost when the
        store cannot be reached.
        """
        self._check_open()
        return await cast(AsyncStoreDriver, self._driver).queues()

    async def purge(self) -> None:
        """Delete every message, group, dead letter, scheduled message and tick record of this
        queue (tests, operators). Not part of the transport contract. Message ids keep
        growing. Raises TransportClosed after close()."""
        self._check_open()
        await cast(AsyncStoreDriver, self._driver).purge()


class AsyncFairnessClient(AsyncClient):
    """Adds the fairness key policies (``SupportsFairness``; docs/fairness.md) over a driver
    that has them: :meth:`set_key_policy`, :meth:`key_policy`, :meth:`delete_key_policy` and
    :meth:`keys`. A *key* is a fairness key, ``""`` for the groups published without one, or
    ``None`` for the default policy of every key that has none of its own."""

    def _fairness_driver(self) -> AsyncFairnessDriver:
        self._check_open()
        return cast(AsyncFairnessDriver, self._driver)

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
        """Store *key*'s policy in the store, for every worker's next claim; return it.

        *weight* (above 0): its share against the other backlogged keys. *max_in_flight*: at
        most that many of its groups leased at once, counted from live leases (an expired
        lease frees its slot). *rate* claims per *per* seconds, *burst* at once (default
        ``max(1, ceil(rate))``), on the store's clock. ``None`` means no cap, no rate.
        Raises InvalidInput for a bad key or value (before any I/O).
        """
        checked_key = check_policy_key(key)
        policy = key_policy(
            weight=weight, max_in_flight=max_in_flight, rate=rate, per=per, burst=burst
        )
        await self._fairness_driver().set_key_policy(checked_key, policy)
        return policy

    async def key_policy(self, key: str | None) -> KeyPolicy | None:
        """Return *key*'s own policy (``None``: the default policy), or None if it has none."""
        checked_key = check_policy_key(key)
        return await self._fairness_driver().key_policy(checked_key)

    async def delete_key_policy(self, key: str | None) -> bool:
        """Drop *key*'s own policy (it then follows the default); True if it had one."""
        checked_key = check_policy_key(key)
        return await self._fairness_driver().delete_key_policy(checked_key)

    async def key_info(self, key: str) -> KeyInfo | None:
        """Return *key* (``""``: the default key) as :meth:`keys` shows it, or None when it has
        no group and no policy of its own. Raises InvalidInput for a bad key."""
        checked_key = check_policy_key(key)
        if checked_key is None:
            raise InvalidInput("key_info needs a key: a fairness key, or '' for the default key")
        return await self._fairness_driver().key_info(checked_key, self._now())

    async def keys(self, limit: int = 100, *, after: str | None = None) -> list[KeyInfo]:
        """Return up to *limit* (1-1000) keys that have groups or a policy of their own, after
        key *after*, in UTF-8 byte order (the default key ``""`` first): each with its policy,
        in-flight groups, backlog, oldest age and tokens. Keyset-paged: pass the last key's
        name as *after*. Raises InvalidInput for a bad limit or *after*."""
        checked_limit, checked_after = check_keys_page(limit, after)
        return await self._fairness_driver().keys(checked_limit, checked_after, self._now())


class AsyncHistoryClient(AsyncClient):
    """Adds the queue's job history (``SupportsHistory``; docs/history.md) over a driver that
    keeps it: :meth:`set_history` and :meth:`history`. The transport option ``history``
    stores its setting when the transport opens (:meth:`open`, or its first settlement)."""

    _history_applied = False

    def _history_driver(self) -> AsyncHistoryDriver:
        self._check_open()
        return cast(AsyncHistoryDriver, self._driver)

    async def _store_origin(self) -> str:
        origin = await super()._store_origin()
        setting = self._options.history
        if setting is not None and not self._history_applied:
            await self._history_driver().set_history(setting)
            self._history_applied = True
        return origin

    async def set_history(self, setting: HistoryRetention | timedelta | str) -> None:
        """Turn the queue's history on with a retention or off, in the store, for every
        transport of the queue from its next settlement.

        *setting*: ``"off"``; a duration (``"90s"``, ``"30m"``, ``"12h"``, ``"7d"`` or a
        timedelta): records younger than that are kept; a row cap (``"1000000"``): at most
        that many, the oldest dropped first; both (``"7d,1000000"``); or a HistoryRetention.
        Turning it off keeps what was recorded. Raises InvalidInput for a bad setting.
        """
        checked = check_history_option(setting)
        if checked is None:
            raise InvalidInput("set_history needs a setting: a retention such as '7d', or 'off'")
        await self._history_driver().set_history(checked)

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
        """Return up to *limit* (1-1000) history records, newest first, matching every filter
        given: the group *group*, the event kind *kind*, finished at or after *since* (epoch
        seconds or an aware datetime), the outcome *outcome* (``acked``, ``nacked``,
        ``released``, ``dead_lettered``, ``exhausted``, ``redriven``) and the message
        *message_id* (its whole story: each delivery with its error, dead letter, redrive).
        Keyset-paged: pass the last record's ``id`` as *after*. Records older than the
        queue's retention are never returned. Raises InvalidInput for a bad argument.
        """
        query = check_history_query(
            group=group,
            kind=kind,
            since=since,
            outcome=outcome,
            message_id=message_id,
            limit=limit,
            after=after,
        )
        return await self._history_driver().history(query, self._now())


class AsyncBrowseClient(AsyncClient):
    """Adds browsing and search (``SupportsBrowse``; :mod:`pgque.core.browse`) over a driver
    that offers them: :meth:`messages`, :meth:`message` and ``scheduled(group_id=)``."""

    def _browse_driver(self) -> AsyncBrowseDriver:
        self._check_open()
        return cast(AsyncBrowseDriver, self._driver)

    async def messages(
        self,
        *,
        group_id: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after: int | None = None,
    ) -> MessagePage:
        """Return a page of up to *limit* (1-1,000) messages that wait in their groups.

        With *group_id*: that group's messages in the group's order, head first (the head is
        the one in flight while a lease is out). With *kind*: only messages of that event
        kind, queue-wide or in *group_id*; a filtered scan that examines at most
        ``pgque.core.browse.SCAN_ROWS`` (10,000) messages per call, so a page may come back
        short, even empty, with a ``next_after``. With neither: the queue's messages in id
        order (the same bounded scan). Pass the page's ``next_after`` as *after* for the next
        page (None: nothing is left); it is a cursor, not a message id. Each item has a
        preview of its data (``PREVIEW_CHARS``, 200 characters, and ``truncated``) and its
        stored size, never the whole payload. Scheduled messages are not listed here: see
        ``scheduled(group_id=)``. Raises InvalidInput for a bad argument.
        """
        query = check_messages_query(group_id=group_id, kind=kind, limit=limit, after=after)
        return await self._browse_driver().messages(query, self._now())

    async def message(self, message_id: int) -> MessageInfo | None:
        """Return the message *message_id*: waiting in its group, in flight, or scheduled
        (``due_at`` set). None once it is settled (acked, dead-lettered) or unknown: its story
        is in ``history()`` when the queue keeps history, a dead letter in ``dead_letters()``.
        Raises InvalidInput unless *message_id* is a positive int."""
        checked = check_message_id(message_id)
        return await self._browse_driver().message(checked, self._now())

    async def scheduled(
        self, *, limit: int = 100, after: int | None = None, group_id: str | None = None
    ) -> list[ScheduledMessage]:
        """Up to *limit* (1-1,000) scheduled messages not due yet, in id order, after id
        *after*; with *group_id*, only that group's (they join its tail when due).

        Raises InvalidInput for a bad limit, *after* or *group_id*.
        """
        if group_id is None:
            return await super().scheduled(limit=limit, after=after)
        checked_group = check_group_id(group_id)
        checked_limit, checked_after = check_scheduled_page(limit, after)
        return await self._browse_driver().group_scheduled(
            checked_group, checked_limit, checked_after, self._now()
        )


class AsyncWorkersClient(AsyncClient):
    """Adds the queue's live workers (``SupportsWorkers``; docs/workers.md) over a driver that
    keeps them: :meth:`heartbeat` and :meth:`goodbye` (what a worker calls) and
    :meth:`workers` (what an operator reads)."""

    def _workers_driver(self) -> AsyncWorkersDriver:
        self._check_open()
        return cast(AsyncWorkersDriver, self._driver)

    async def heartbeat(self, beat: WorkerBeat) -> None:
        """Register the worker *beat* describes, or refresh its row, on the store's clock: its
        identity, its slots and what each busy one holds. A worker calls this every
        ``heartbeat_every`` seconds (:class:`~pgque.core.Worker` does). Rows of workers silent
        for longer than ``PRUNE_AFTER_S`` are removed. Raises InvalidInput for a bad beat."""
        checked = check_worker_beat(beat)
        await self._workers_driver().heartbeat(checked, self._now())

    async def goodbye(self, worker: str) -> bool:
        """Remove the row of the worker *worker* (its id, the worker's name): a clean stop.
        Return False when it had none. Raises InvalidInput for a bad id."""
        return await self._workers_driver().goodbye(check_worker_id(worker))

    async def workers(self, *, include_gone: bool = True) -> list[WorkerInfo]:
        """Return the queue's workers by id, each with what its busy slots held at its last
        heartbeat and the unexpired leases the store holds in its name. A worker whose last
        heartbeat is older than ``ALIVE_MULTIPLE`` (3) intervals is listed with ``alive``
        False (not at all without *include_gone*) until its row is pruned. Raises InvalidInput
        for a non-bool *include_gone*."""
        if not isinstance(include_gone, bool):
            raise InvalidInput(f"include_gone must be a bool, not {include_gone!r}")
        return await self._workers_driver().workers(include_gone, self._now())
