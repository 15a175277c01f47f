"""The asyncio sharded transport: one logical queue over several asyncio transports."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import TypeVar

from pgque.core.contract import (
    AsyncSupportsPurge,
    AsyncSupportsServerTime,
    AsyncSupportsWakeups,
    AsyncTransport,
    ErrorLike,
)
from pgque.core.errors import (
    ConnectionLost,
    InvalidInput,
    PartialFailure,
    PartlySettled,
    PgqueError,
    TransportClosed,
)
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
from pgque.core.validation import (
    MAX_BATCH,
    OnExhausted,
    check_after_id,
    check_batch_size,
    check_claim_count,
    check_delay,
    check_entry_name,
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
    check_settlements,
    check_text_id,
    check_tick,
)
from pgque.sharding._common import (
    ShardCodec,
    check_shards,
    fair_share,
    log,
    merge_by,
    merge_stats,
    sharded_capabilities,
)
from pgque.sharding._wait_async import wait_any  # async-only

# sync: from pgque.sharding._wait_threads import ThreadedWaits

__all__ = ["AsyncShardedTransport"]

R = TypeVar("R")

#: Seconds a shard that could not be reached is left out of claims before it is asked again.
DOWN_RETRY_S = 1.0


class AsyncShardedTransport:
    """One logical queue spread over several asyncio transports, the *shards* (asyncio API).

    A group lives on shard ``shard_for(group_id, len(shards))`` for good, so per-group FIFO,
    exclusivity and fencing are each shard's own and hold exactly. Message ids are
    ``local_id * len(shards) + shard``: unique across shards and decodable to their shard.
    Claims go round the shards in turn, starting one shard further on each call; stats,
    groups, dead letters and scheduled messages are merged. What becomes per shard (id order
    across groups, round-robin across all groups, one stats snapshot, batch atomicity) is
    declared off in :attr:`capabilities`. Shards may be any transports (several PostgreSQL
    primaries, sub-queues of one Redis Cluster); their queue names may differ; *queue* names
    the logical queue (default: the first shard's). Every shard must have the same
    ``max_attempts`` and ``on_exhausted``.

    A shard that cannot be reached (ConnectionLost) is asked last in claims for *down_retry*
    seconds (only when the others do not fill the claim), while the others serve; a claim
    that gets nothing while a shard could not be asked raises ConnectionLost (an empty answer
    always means every shard had nothing). Calls routed to it (by group, id or lease) fail
    with ConnectionLost, a ``settle_and_claim`` carrying its settlements at once, before any
    I/O, while it is left out. Shards are called one after another;
    :meth:`wait_for_messages` waits on all at once. Raises ConfigurationError for an empty or
    invalid list of shards, InvalidInput for a bad *down_retry*.
    """

    def __new__(
        cls,
        shards: Sequence[AsyncTransport],
        *,
        queue: str | None = None,
        down_retry: float = DOWN_RETRY_S,
    ) -> AsyncShardedTransport:
        # The optional abilities are methods of the class exactly when every shard has them
        # (an ``isinstance`` check against the wake-ups protocol reads the class): one subclass
        # per mix.
        if cls is AsyncShardedTransport:
            listed = list(shards) if isinstance(shards, Sequence) else []
            wakeups = bool(listed) and all(_has_wakeups(s) for s in listed)
            purge = bool(listed) and all(_has_purge(s) for s in listed)
            cls = _FLAVOURS[(wakeups, purge)]
        return super().__new__(cls)

    def __init__(
        self,
        shards: Sequence[AsyncTransport],
        *,
        queue: str | None = None,
        down_retry: float = DOWN_RETRY_S,
    ) -> None:
        self._down_retry = check_seconds(down_retry, "down_retry")
        self._shards: list[AsyncTransport] = check_shards(shards, AsyncTransport)
        logical = self._shards[0].queue if queue is None else check_text_id(queue, "queue", 200)
        self._codec = ShardCodec(logical, len(self._shards), [s.queue for s in self._shards])
        self._capabilities = dataclasses.replace(
            sharded_capabilities([s.capabilities for s in self._shards]),
            wakeups=isinstance(self, AsyncSupportsWakeups),
            purge=isinstance(self, AsyncSupportsPurge),
        )
        self._next = 0
        #: shard -> when (time.monotonic) claims ask it again after it could not be reached
        self._down: dict[int, float] = {}
        self._closed = False
        # sync: self._waits = ThreadedWaits(len(self._shards))

    # -- properties -------------------------------------------------------------------------

    @property
    def shards(self) -> tuple[AsyncTransport, ...]:
        """The shards, in order: shard *k* holds the groups with ``shard_for(g, S) == k``."""
        return tuple(self._shards)

    @property
    def capabilities(self) -> Capabilities:
        """What every shard supports, with the per-shard promises off."""
        return self._capabilities

    @property
    def queue(self) -> str:
        """The logical queue name (leases carry it)."""
        return self._codec.queue

    @property
    def max_attempts(self) -> int | None:
        """Deliveries a head gets before ``on_exhausted`` applies (every shard's)."""
        return self._shards[0].max_attempts

    @property
    def on_exhausted(self) -> OnExhausted:
        """What happens to a head that used up ``max_attempts`` (every shard's)."""
        return self._shards[0].on_exhausted

    def shard_of(self, group_id: str) -> int:
        """Return the index of the shard *group_id* lives on; raises InvalidInput."""
        return self._codec.shard_of_group(group_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(queue={self.queue!r}, shards={len(self._shards)})"

    # -- helpers ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise TransportClosed()

    def _rotation(self) -> list[int]:
        """Shard indices for one claim, starting one further on than the last claim."""
        count = len(self._shards)
        start = self._next
        self._next = (start + 1) % count
        return [(start + i) % count for i in range(count)]

    def _reached(self, index: int) -> None:
        if self._down.pop(index, None) is not None:
            log.warning("pgque sharded queue %s: shard %d answers again", self.queue, index)

    def _unreachable(self, index: int, error: ConnectionLost) -> None:
        first = index not in self._down
        self._down[index] = time.monotonic() + self._down_retry
        if first:
            log.warning(
                "pgque sharded queue %s: shard %d is unreachable, claims skip it: %s",
                self.queue,
                index,
                error,
            )

    async def _each(self, call: Callable[[AsyncTransport], Awaitable[R]]) -> list[R]:
        """Call every shard in order; return their answers."""
        self._check_open()
        return [await call(shard) for shard in self._shards]

    async def _each_writing(
        self, calls: Sequence[tuple[int, Callable[[AsyncTransport], Awaitable[R]]]], what: str
    ) -> list[R]:
        """Make the writing *calls* (shard index, call) one after another; return their answers.

        When one fails after an earlier one succeeded, the earlier ones stand: the failure is
        raised as :meth:`_partial` says (*what* names what the call does, for its message).
        """
        self._check_open()
        answers: list[R] = []
        for index, call in calls:
            try:
                answers.append(await call(self._shards[index]))
            except PgqueError as exc:
                if not answers:
                    raise
                raise self._partial(exc, index, what) from exc
        return answers

    def _partial(self, error: PgqueError, index: int, what: str) -> PgqueError:
        """The error for a call that failed on shard *index* after other shards had applied
        their part: ConnectionLost with ``maybe_applied=True`` for a lost connection (retrying
        it is how a caller finds out), else PartialFailure."""
        message = (
            f"{what} on sharded queue {self.queue!r} failed on shard {index} after other "
            f"shards had applied their part (that stands): {error}"
        )
        if isinstance(error, ConnectionLost):
            return ConnectionLost(message, maybe_applied=True)
        return PartialFailure(message, shard=index, error=error)

    # -- publishing -------------------------------------------------------------------------

    async def publish(
        self, group_id: str, event: Event, *, priority: int = 0, delay: float = 0.0
    ) -> int:
        """Append *event* to *group_id*'s tail on the group's shard; return its logical id.

        With *delay* > 0 the message is scheduled on that shard. Raises InvalidInput for a bad
        group id, priority, delay or event.
        """
        self._check_open()
        index = self._codec.shard_of_group(group_id)
        local = await self._shards[index].publish(group_id, event, priority=priority, delay=delay)
        return self._codec.encode(index, local)

    async def publish_many(
        self, items: Iterable[tuple[str, Event]], *, priority: int = 0, delay: float = 0.0
    ) -> list[int]:
        """Append many (group_id, event) pairs, in order; return their logical ids.

        Atomic per shard, not across shards: the items of each shard go in one call, shard
        after shard; if one shard fails after others appended, what they appended stays and
        the call raises ConnectionLost with ``maybe_applied=True`` (a lost connection) or
        PartialFailure. Raises InvalidInput before any I/O for a bad group id, event (not
        JSON), priority or delay, or more than 10,000 items; an event over a shard's
        ``max_event_bytes`` is refused by that shard, in turn.
        """
        self._check_open()
        priority = check_priority(priority)
        delay = check_delay(delay)
        given: object = items
        if isinstance(given, (str, bytes)):
            raise InvalidInput("items must be (group_id, event) pairs")
        try:
            listed = list(items)
        except TypeError as exc:
            raise InvalidInput("items must be an iterable of (group_id, event) pairs") from exc
        if len(listed) > MAX_BATCH:
            raise InvalidInput(f"at most {MAX_BATCH} items, not {len(listed)}")
        by_shard: dict[int, list[tuple[int, tuple[str, Event]]]] = {}
        for position, item in enumerate(listed):
            if not isinstance(item, tuple) or len(item) != 2:
                raise InvalidInput(f"item {position} must be a (group_id, event) pair")
            if not isinstance(item[1], Event):
                raise InvalidInput(f"item {position}: expected an Event")
            item[1].to_json()  # raises InvalidInput for data that is not JSON
            index = self._codec.shard_of_group(item[0])
            by_shard.setdefault(index, []).append((position, item))
        ids: list[int] = [0] * len(listed)
        calls = [
            (index, _publishing([item for _, item in by_shard[index]], priority, delay))
            for index in sorted(by_shard)
        ]
        answers = await self._each_writing(calls, "publish_many")
        for (index, _), local in zip(calls, answers, strict=True):
            for (position, _), local_id in zip(by_shard[index], local, strict=True):
                ids[position] = self._codec.encode(index, local_id)
        return ids

    async def cancel(self, message_id: int) -> bool:
        """Drop a scheduled message that is not due yet (on its shard); True if dropped."""
        self._check_open()
        message_id = check_message_id(message_id)
        index, local = self._codec.decode(message_id)
        if local < 1:
            return False
        return await self._shards[index].cancel(local)

    async def scheduled(
        self, *, limit: int = 100, after: int | None = None
    ) -> list[ScheduledMessage]:
        """Up to *limit* scheduled messages of every shard, merged in logical id order."""
        self._check_open()
        limit, after = check_scheduled_page(limit, after)
        pages = []
        for index, shard in enumerate(self._shards):
            page = await shard.scheduled(limit=limit, after=self._codec.local_after(index, after))
            pages.append([self._codec.scheduled(index, m) for m in page])
        return merge_by(pages, lambda m: m.id, limit)

    async def publish_tick(
        self, entry: str, tick: float, group_id: str, event: Event, *, priority: int = 0
    ) -> int | None:
        """Publish tick *tick* of *entry* once, on the shard of *group_id*.

        The tick's message goes where its group lives, like any other message of the group,
        and that shard records the entry's last tick in the same atomic step, so exactly-once
        holds as on one queue while an entry keeps its group. When an entry's group was
        changed (to one on another shard), a tick at or before the latest one another shard
        recorded is not published again; two schedulers running the old and the new setting
        at once can each publish one tick, once per shard (docs/scaling.md).
        """
        self._check_open()
        entry = check_entry_name(entry)
        tick = check_tick(tick)
        index = self._codec.shard_of_group(group_id)
        for other, shard in enumerate(self._shards):
            if other != index:
                last = await shard.last_tick(entry)
                if last is not None and last >= tick:
                    return None
        local = await self._shards[index].publish_tick(
            entry, tick, group_id, event, priority=priority
        )
        return None if local is None else self._codec.encode(index, local)

    async def server_time(self) -> float:
        """Return the first shard's time now (its ``server_time``, else this machine's): one
        clock for every scheduler of the sharded queue."""
        self._check_open()
        first = self._shards[0]
        if isinstance(first, AsyncSupportsServerTime):
            return await first.server_time()
        return time.time()

    async def last_tick(self, entry: str) -> float | None:
        """The latest tick of *entry* published by :meth:`publish_tick` (on any shard), or
        None."""
        self._check_open()
        entry = check_entry_name(entry)
        ticks = [t for t in await self._each(lambda s: s.last_tick(entry)) if t is not None]
        return max(ticks) if ticks else None

    # -- claiming ---------------------------------------------------------------------------

    async def claim(
        self, visibility: float = 30.0, *, min_priority: int = 0, holder: str | None = None
    ) -> Lease | None:
        """Lease one head, asking the shards in turn from a rotating first shard; or None."""
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
        """Lease the heads of up to *n* distinct groups from several shards.

        Each shard in turn (from a rotating first one) is asked for its fair share of what
        is still missing; shards that filled their share are then asked for the rest.
        """
        self._check_open()
        n = check_batch_size(n)
        visibility = check_seconds(visibility, "visibility")
        min_priority = check_priority(min_priority, "min_priority")
        holder = check_holder(holder)
        result = await self._settle_and_claim({}, n, visibility, min_priority, [holder] * n)
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
        """Settle finished leases on their shards and lease up to *n* new heads.

        Each shard gets one ``settle_and_claim`` call with its settlements and its fair share
        of the claim, so the call is atomic per shard, not across shards: when a shard with
        settlements cannot be reached, leases just taken from other shards are released and
        ConnectionLost (``maybe_applied=True``) is raised; settlements already applied on
        other shards stay (settling them again answers False). A list of *holder* labels is
        handed out in order, lease *i* with label *i*. Raises InvalidInput before any I/O for
        a bad settlement, *n*, *visibility*, *min_priority* or *holder*.
        """
        self._check_open()
        given: object = settlements
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
            raise InvalidInput("settlements must be a sequence of Settlement")
        if len(settlements) > MAX_BATCH:
            raise InvalidInput(f"at most {MAX_BATCH} settlements, not {len(settlements)}")
        by_shard: dict[int, list[tuple[int, Settlement]]] = {}
        for position, settlement in enumerate(settlements):
            index, inner = self._codec.unwrap_settlement(settlement)
            by_shard.setdefault(index, []).append((position, inner))
        for part in by_shard.values():
            first = part[0][1].lease
            # Checked here so that nothing is sent when any settlement is bad.
            check_settlements([s for _, s in part], first.queue, first.origin, 0.0)
        n = check_claim_count(n)
        visibility = check_seconds(visibility, "visibility")
        min_priority = check_priority(min_priority, "min_priority")
        holders = check_holders(holder, n)
        return await self._settle_and_claim(
            by_shard, n, visibility, min_priority, holders, total=len(settlements)
        )

    async def _settle_and_claim(
        self,
        by_shard: dict[int, list[tuple[int, Settlement]]],
        n: int,
        visibility: float,
        min_priority: int,
        holders: list[str | None],
        *,
        total: int = 0,
    ) -> SettleResult:
        """Route settlements and the claim over the shards (arguments checked)."""
        settled: list[bool] = [False] * total
        #: positions whose shard answered (their result is known even if another shard fails)
        answered: set[int] = set()
        leases: list[Lease] = []
        now = time.monotonic()
        for index in by_shard:
            if self._down.get(index, 0.0) > now:
                raise ConnectionLost(
                    f"shard {index} of sharded queue {self.queue!r} is unreachable "
                    "(nothing was sent)"
                )
        # Only a claim moves the rotation (a settle-only call must not change whose turn it is).
        order = self._rotation() if n else list(range(len(self._shards)))
        deferred: list[int] = []
        full: list[int] = []
        errors: list[ConnectionLost] = []
        failed_settling: ConnectionLost | None = None
        settled_somewhere = False
        for i, index in enumerate(order):
            part = by_shard.get(index, [])
            missing = n - len(leases)
            share = fair_share(missing, len(order) - i)
            if not part and share == 0:
                continue
            if not part and self._down.get(index, 0.0) > now:
                deferred.append(index)  # could not be reached lately: asked last, if at all
                continue
            labels = holders[len(leases) : len(leases) + share]
            result = await self._ask(
                index,
                [s for _, s in part],
                share,
                visibility,
                min_priority,
                labels,
                taken=leases,
                settled_somewhere=settled_somewhere,
            )
            if isinstance(result, ConnectionLost):
                errors.append(result)
                if part and failed_settling is None:
                    failed_settling = result
                continue
            settled_somewhere = settled_somewhere or bool(part)
            for (position, _), done in zip(part, result.settled, strict=True):
                settled[position] = done
                answered.add(position)
            leases += [self._codec.wrap(index, lease) for lease in result.leases]
            if share and len(result.leases) == share:
                full.append(index)
        # Shards that filled their share may have more; a shard left out is asked last, only
        # when the others did not fill the claim: an empty answer must mean that every shard
        # was asked and had nothing (a worker stops when idle on it), never "one was skipped".
        for index in full + deferred:
            missing = n - len(leases)
            if missing == 0 or failed_settling is not None:
                break
            result = await self._ask(
                index,
                [],
                missing,
                visibility,
                min_priority,
                holders[len(leases) :],
                taken=leases,
                settled_somewhere=settled_somewhere,
            )
            if isinstance(result, ConnectionLost):
                errors.append(result)
                continue
            leases += [self._codec.wrap(index, lease) for lease in result.leases]
        if failed_settling is not None:
            await self._give_back(leases)
            raise PartlySettled(
                f"a shard of sharded queue {self.queue!r} could not be reached while settling "
                f"(settlements on other shards stand): {failed_settling}",
                settled=[settled[p] if p in answered else None for p in range(total)],
            ) from failed_settling
        if n and not leases and errors:
            # Nothing claimed while a shard could not be asked: that is not "empty".
            raise ConnectionLost(
                f"a shard of sharded queue {self.queue!r} could not be reached and the others "
                f"had nothing to claim: {errors[0]}",
                maybe_applied=settled_somewhere,
            ) from errors[0]
        return SettleResult(settled=settled, leases=leases)

    async def _ask(
        self,
        index: int,
        settlements: list[Settlement],
        share: int,
        visibility: float,
        min_priority: int,
        labels: list[str | None],
        *,
        taken: list[Lease],
        settled_somewhere: bool,
    ) -> SettleResult | ConnectionLost:
        """One shard's part of :meth:`_settle_and_claim`: its settlements and *share* leases.

        Returns the ConnectionLost of a shard that could not be reached (it is left out of
        claims for a while). A refusal (a conflict, a bad schema, ...) gives the leases
        *taken* from other shards back and is raised: as it is when nothing was settled
        elsewhere, else as :meth:`_partial` says.
        """
        try:
            result = await self._shards[index].settle_and_claim(
                settlements,
                share,
                visibility,
                min_priority=min_priority,
                holder=_labels(labels, share),
            )
        except ConnectionLost as exc:
            self._unreachable(index, exc)
            return exc
        except PgqueError as exc:
            await self._give_back(taken)
            if not settled_somewhere:
                raise
            raise self._partial(exc, index, "settle_and_claim") from exc
        self._reached(index)
        return result

    async def _give_back(self, leases: list[Lease]) -> None:
        """Release *leases* just taken, best effort (a failed call ends at the lease's expiry)."""
        for lease in leases:
            with contextlib.suppress(PgqueError):
                await self.release(lease)

    # -- settling one lease -----------------------------------------------------------------

    async def ack(self, lease: Lease) -> bool:
        """Ack *lease* on its shard; False if it is not held."""
        self._check_open()
        index, inner = self._codec.unwrap(lease)
        return await self._shards[index].ack(inner)

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack several leases, one call per shard (atomic per shard only); results in order.

        If one shard fails after others acked, their acks stand and the call raises
        ConnectionLost with ``maybe_applied=True`` (a lost connection) or PartialFailure.
        Raises InvalidInput before any I/O for a lease that is not this queue's or more than
        10,000 leases.
        """
        self._check_open()
        given: object = leases
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
            raise InvalidInput("leases must be a sequence of Lease")
        if len(leases) > MAX_BATCH:
            raise InvalidInput(f"at most {MAX_BATCH} leases, not {len(leases)}")
        by_shard: dict[int, list[tuple[int, Lease]]] = {}
        listed = list(leases)
        for position, lease in enumerate(listed):
            index, inner = self._codec.unwrap(lease)
            by_shard.setdefault(index, []).append((position, inner))
        out = [False] * len(listed)
        calls = [
            (index, _acking([inner for _, inner in by_shard[index]])) for index in sorted(by_shard)
        ]
        answers = await self._each_writing(calls, "ack_many")
        for (index, _), results in zip(calls, answers, strict=True):
            for (position, _), done in zip(by_shard[index], results, strict=True):
                out[position] = done
        return out

    async def nack(
        self, lease: Lease, *, delay: float = 0.0, error: ErrorLike | None = None
    ) -> bool:
        """Nack *lease* on its shard, as :meth:`AsyncTransport.nack`."""
        self._check_open()
        index, inner = self._codec.unwrap(lease)
        return await self._shards[index].nack(inner, delay=delay, error=error)

    async def extend(self, lease: Lease, visibility: float) -> Lease | None:
        """Renew *lease* on its shard; None if it is not held."""
        self._check_open()
        index, inner = self._codec.unwrap(lease)
        renewed = await self._shards[index].extend(inner, visibility)
        return None if renewed is None else self._codec.wrap(index, renewed)

    async def release(self, lease: Lease) -> bool:
        """Give *lease* back on its shard without counting the attempt."""
        self._check_open()
        index, inner = self._codec.unwrap(lease)
        return await self._shards[index].release(inner)

    async def dead_letter(
        self, lease: Lease, reason: str, *, error: ErrorLike | None = None
    ) -> bool:
        """Dead-letter *lease*'s message on its shard; its group continues."""
        self._check_open()
        index, inner = self._codec.unwrap(lease)
        return await self._shards[index].dead_letter(inner, reason, error=error)

    # -- dead letters -----------------------------------------------------------------------

    async def dead_letters(self, limit: int = 100, *, after: int | None = None) -> list[DeadLetter]:
        """Up to *limit* dead letters of every shard, merged in logical id order."""
        self._check_open()
        limit = check_limit(limit)
        after = check_after_id(after)
        pages = []
        for index, shard in enumerate(self._shards):
            page = await shard.dead_letters(limit, after=self._codec.local_after(index, after))
            pages.append([self._codec.dead_letter(index, d) for d in page])
        return merge_by(pages, lambda d: d.id, limit)

    async def redrive(
        self, ids: Sequence[int] | None = None, *, in_place: bool = True, retry_now: bool = False
    ) -> int:
        """Return dead letters to their groups, each on its own shard; return how many."""
        self._check_open()
        checked = check_ids(ids)
        parts: dict[int, list[int] | None]
        if checked is None:
            parts = dict.fromkeys(range(len(self._shards)))
        else:
            parts = dict(self._codec.split_ids(checked))
        calls = [
            (index, _redriving(local, in_place, retry_now))
            for index, local in sorted(parts.items())
        ]
        return sum(await self._each_writing(calls, "redrive"))

    async def delete_dead_letters(self, ids: Sequence[int]) -> int:
        """Delete the dead letters with these logical ids, each on its shard; return how many."""
        self._check_open()
        checked = check_ids(ids)
        if checked is None:
            raise InvalidInput("ids must be a sequence of ints")
        parts = sorted(self._codec.split_ids(checked).items())
        calls = [(index, _deleting(local)) for index, local in parts]
        return sum(await self._each_writing(calls, "delete_dead_letters"))

    # -- groups -----------------------------------------------------------------------------

    async def unblock(
        self, group_id: str, *, drop_head: bool = False, head: int | None = None
    ) -> bool:
        """Release a blocked group on its shard (with *head*, a logical message id: only if
        that message is its head; one of another shard never is)."""
        self._check_open()
        index = self._codec.shard_of_group(group_id)
        local = check_head(head)
        if local is not None:
            found = self._codec.split_ids([local]).get(index)
            if not found:
                return False
            local = found[0]
        return await self._shards[index].unblock(group_id, drop_head=drop_head, head=local)

    async def retry_now(self, group_id: str) -> bool:
        """End the retry delay the group waits out, on its shard."""
        self._check_open()
        index = self._codec.shard_of_group(group_id)
        return await self._shards[index].retry_now(group_id)

    async def group(self, group_id: str) -> GroupInfo | None:
        """Everything about one group (asked of its shard), or None."""
        self._check_open()
        index = self._codec.shard_of_group(group_id)
        info = await self._shards[index].group(group_id)
        return None if info is None else self._codec.group(index, info)

    async def groups(
        self,
        *,
        state: GroupStateName | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* groups of every shard, merged in byte order of id, after *after*."""
        self._check_open()
        state, limit, after = check_groups_page(state, limit, after)
        pages = []
        for index, shard in enumerate(self._shards):
            page = await shard.groups(state=state, limit=limit, after=after)
            pages.append([self._codec.group(index, g) for g in page])
        return merge_by(pages, lambda g: g.group_id.encode("utf-8"), limit)

    async def oldest_groups(
        self,
        *,
        limit: int = 10,
        state: GroupStateName | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* groups of every shard holding a message, the oldest head first.

        Each shard's own oldest *limit* merged by (head enqueue time, id bytes): exact, since
        a group lives on one shard and the answer's groups are among their shard's oldest.
        """
        self._check_open()
        state, limit = check_oldest_groups(state, limit)
        pages = []
        for index, shard in enumerate(self._shards):
            page = await shard.oldest_groups(limit=limit, state=state)
            pages.append([self._codec.group(index, g) for g in page])
        return merge_by(
            pages, lambda g: (g.head_enqueued_at or 0.0, g.group_id.encode("utf-8")), limit
        )

    async def pause(self, group_id: str) -> bool:
        """Hold *group_id* on its shard; False if it was already paused."""
        self._check_open()
        index = self._codec.shard_of_group(group_id)
        return await self._shards[index].pause(group_id)

    async def resume(self, group_id: str) -> bool:
        """Lift the hold of :meth:`pause` on the group's shard."""
        self._check_open()
        index = self._codec.shard_of_group(group_id)
        return await self._shards[index].resume(group_id)

    async def stats(self) -> QueueStats:
        """The shards' stats summed: each shard's is a snapshot, the sum is not one."""
        return merge_stats(await self._each(lambda s: s.stats()))

    # -- abilities --------------------------------------------------------------------------

    async def _wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news from any shard (:class:`_AsyncWakeups`).

        Every shard's wait runs at once and the first True ends the call (the others are
        cancelled). A shard whose wait fails with ConnectionLost is left out; if every shard
        fails, the first error is raised. Raises InvalidInput for a bad timeout,
        TransportClosed.
        """
        timeout = check_seconds(timeout, "timeout")
        self._check_open()
        waiters = [
            (i, s) for i, s in enumerate(self._shards) if isinstance(s, AsyncSupportsWakeups)
        ]
        return await wait_any([s for _, s in waiters], timeout)  # async-only
        # sync: return self._waits.wait(waiters, timeout)

    async def _purge(self) -> None:
        """(:class:`_AsyncPurge`) Empty every shard's queue, one after another."""
        self._check_open()
        for shard in self._shards:
            if not isinstance(shard, AsyncSupportsPurge):
                raise PgqueError(f"shard {shard!r} cannot purge")
        for shard in self._shards:
            if isinstance(shard, AsyncSupportsPurge):
                await shard.purge()

    async def close(self) -> None:
        """Close every shard (all are tried; the first failure is raised); idempotent."""
        if self._closed:
            return
        self._closed = True
        # sync: self._waits.close()
        first: BaseException | None = None
        for shard in self._shards:
            try:
                await shard.close()
            except BaseException as exc:  # a cancellation too: the other shards are closed first
                first = first or exc
        if first is not None:
            raise first

    async def __aenter__(self) -> AsyncShardedTransport:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _has_wakeups(shard: object) -> bool:
    caps = getattr(shard, "capabilities", None)
    return isinstance(shard, AsyncSupportsWakeups) and bool(getattr(caps, "wakeups", False))


def _has_purge(shard: object) -> bool:
    caps = getattr(shard, "capabilities", None)
    return isinstance(shard, AsyncSupportsPurge) and bool(getattr(caps, "purge", False))


class _AsyncWakeups(AsyncShardedTransport):
    """A sharded transport whose shards all have wake-ups."""

    async def wait_for_messages(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds for news from any shard; True if some came.

        Every shard's wait runs at once; the first True ends the call. See
        :meth:`AsyncShardedTransport._wait_for_messages`.
        """
        return await self._wait_for_messages(timeout)


class _AsyncPurge(AsyncShardedTransport):
    """A sharded transport whose shards can all purge."""

    async def purge(self) -> None:
        """Empty every shard's queue (tests, operators), one after another."""
        await self._purge()


class _AsyncWakeupsPurge(_AsyncWakeups, _AsyncPurge):
    """A sharded transport whose shards all have wake-ups and can purge."""


for _flavour in (_AsyncWakeups, _AsyncPurge, _AsyncWakeupsPurge):
    # What users see (repr, errors) is the public class.
    _flavour.__name__ = _flavour.__qualname__ = AsyncShardedTransport.__name__

#: (wake-ups, purge) -> the class a sharded transport over such shards is made of.
_FLAVOURS: dict[tuple[bool, bool], type[AsyncShardedTransport]] = {
    (False, False): AsyncShardedTransport,
    (True, False): _AsyncWakeups,
    (False, True): _AsyncPurge,
    (True, True): _AsyncWakeupsPurge,
}


def _labels(labels: list[str | None], count: int) -> str | list[str] | None:
    """The holder argument for a shard's claim of *count*: one label, or a list of them."""
    if count == 0 or len(set(labels)) <= 1:
        return labels[0] if labels else None
    return [label or "" for label in labels]


# Calls of one shard for the transport's ``_each_writing``, bound to their arguments
# (a lambda in a loop would see the loop's last values).


def _publishing(
    items: list[tuple[str, Event]], priority: int, delay: float
) -> Callable[[AsyncTransport], Awaitable[list[int]]]:
    def call(shard: AsyncTransport) -> Awaitable[list[int]]:
        return shard.publish_many(items, priority=priority, delay=delay)

    return call


def _acking(leases: list[Lease]) -> Callable[[AsyncTransport], Awaitable[list[bool]]]:
    def call(shard: AsyncTransport) -> Awaitable[list[bool]]:
        return shard.ack_many(leases)

    return call


def _redriving(
    ids: list[int] | None, in_place: bool, retry_now: bool
) -> Callable[[AsyncTransport], Awaitable[int]]:
    def call(shard: AsyncTransport) -> Awaitable[int]:
        return shard.redrive(ids, in_place=in_place, retry_now=retry_now)

    return call


def _deleting(ids: list[int]) -> Callable[[AsyncTransport], Awaitable[int]]:
    def call(shard: AsyncTransport) -> Awaitable[int]:
        return shard.delete_dead_letters(ids)

    return call
