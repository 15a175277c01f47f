"""The asyncio sharded queue: :class:`AsyncShardedDriver`, each primitive routed to the shard or
shards it concerns, and its front door :class:`AsyncShardedTransport`."""

# This file is the source of its blocking twin, _sync.py (tools/async_to_sync.py).  # async-only

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

from pgque.core.client import AsyncClient, AsyncFairnessClient, AsyncWakeupsClient
from pgque.core.contract import (
    AsyncSupportsFairness,
    AsyncSupportsPurge,
    AsyncSupportsServerTime,
    AsyncSupportsWakeups,
    AsyncTransport,
)
from pgque.core.driver import ClaimRequest, GroupCommand, Publication
from pgque.core.errors import ConnectionLost, PartialFailure, PartlySettled, PgqueError
from pgque.core.models import (
    DeadLetter,
    Event,
    GroupInfo,
    GroupStateName,
    KeyInfo,
    KeyPolicy,
    Lease,
    QueueStats,
    ScheduledMessage,
    Settlement,
    SettleResult,
)
from pgque.core.transport_options import TransportOptions
from pgque.core.validation import (
    MAX_EVENT_BYTES_LIMIT,
    CheckedSettlement,
    check_group_id,
    check_seconds,
    check_text_id,
)
from pgque.sharding._merging import (
    abilities,
    merge_by,
    merge_key,
    merge_keys,
    merge_stats,
    sharded_capabilities,
)
from pgque.sharding._routing import BACKEND, ShardCodec, check_shards, fair_share
from pgque.sharding._wait_async import wait_any  # async-only

# sync: from pgque.sharding._wait_threads import ThreadedWaits

__all__ = ["AsyncShardedDriver", "AsyncShardedTransport"]

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("pgque.sharding")

#: Seconds a shard that could not be reached is left out of claims before it is asked again.
DOWN_RETRY_S = 1.0


class AsyncShardedDriver:
    """The primitives of one logical queue over *shards*, called one after another (the
    routing, merging and outages :class:`AsyncShardedTransport` describes). Raises
    ConfigurationError for an invalid list of shards, InvalidInput for a bad *queue* or
    *down_retry*.
    """

    backend = BACKEND

    def __init__(
        self, shards: Sequence[AsyncTransport], queue: str | None, down_retry: float
    ) -> None:
        self._down_retry = check_seconds(down_retry, "down_retry")
        self.shards: list[AsyncTransport] = check_shards(shards, AsyncTransport)
        logical = self.shards[0].queue if queue is None else check_text_id(queue, "queue", 200)
        self.codec = ShardCodec(logical, [s.queue for s in self.shards])
        parts = [s.capabilities for s in self.shards]
        self.capabilities = sharded_capabilities(parts, *abilities(self.shards))
        self._next = 0
        #: shard -> when (time.monotonic) claims ask it again after it could not be reached
        self._down: dict[int, float] = {}
        self._closed = False
        # sync: self._waits = ThreadedWaits(len(self.shards))

    async def open(self) -> str:
        return self.codec.origin

    def _rotation(self) -> list[int]:
        """Shard indices for one claim, starting one further on than the last claim."""
        count, start = len(self.shards), self._next
        self._next = (start + 1) % count
        return [(start + i) % count for i in range(count)]

    def _is_down(self, index: int) -> bool:
        return self._down.get(index, 0.0) > time.monotonic()

    async def _in_turn(
        self,
        parts: dict[int, T],
        call: Callable[[AsyncTransport, T], Awaitable[R]],
        what: str,
    ) -> dict[int, R]:
        """Make the writing *call* with each shard's part, shard after shard; a failure after an
        earlier success (that stands) is raised as :meth:`_partial` says (*what*: the call)."""
        answers: dict[int, R] = {}
        for index, part in sorted(parts.items()):
            try:
                answers[index] = await call(self.shards[index], part)
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
            f"{what} on sharded queue {self.codec.queue!r} failed on shard {index} after other "
            f"shards had applied their part (that stands): {error}"
        )
        if isinstance(error, ConnectionLost):
            return ConnectionLost(message, maybe_applied=True)
        return PartialFailure(message, shard=index, error=error)

    async def publish(
        self, items: Sequence[Publication], priority: int, delay: float, now: float | None
    ) -> list[int]:
        where = [self.codec.shard_of(item.group_id) for item in items]
        parts: dict[int, list[tuple[str, Event]]] = {}
        for index, item in zip(where, items, strict=True):
            parts.setdefault(index, []).append((item.group_id, item.event))
        # The front door gives every item of one call the same key.
        key = items[0].fairness_key if items else None

        async def append(shard: AsyncTransport, part: list[tuple[str, Event]]) -> list[int]:
            return await shard.publish_many(part, priority=priority, delay=delay, fairness_key=key)

        answers = await self._in_turn(parts, append, "publish_many")
        local = {index: iter(ids) for index, ids in answers.items()}
        return [self.codec.encode(index, next(local[index])) for index in where]

    async def cancel(self, message_id: int, now: float | None) -> bool:
        index, local = self.codec.decode(message_id)
        return local >= 1 and await self.shards[index].cancel(local)

    async def scheduled(
        self, limit: int, after: int | None, now: float | None
    ) -> list[ScheduledMessage]:
        pages = []
        for index, shard in enumerate(self.shards):
            page = await shard.scheduled(limit=limit, after=self.codec.local_after(index, after))
            pages.append([self.codec.scheduled(index, m) for m in page])
        return merge_by(pages, lambda m: m.id, limit)

    async def publish_tick(
        self, entry: str, tick: float, item: Publication, priority: int, now: float | None
    ) -> int | None:
        """Publish the tick on its group's shard, which records the entry's last tick in the
        same atomic step; a tick at or before the latest one another shard recorded (the
        entry's group moved) is not published again (docs/scaling.md)."""
        index = self.codec.shard_of(item.group_id)
        for other, shard in enumerate(self.shards):
            if other != index:
                last = await shard.last_tick(entry)
                if last is not None and last >= tick:
                    return None
        local = await self.shards[index].publish_tick(
            entry,
            tick,
            item.group_id,
            item.event,
            priority=priority,
            fairness_key=item.fairness_key,
        )
        return None if local is None else self.codec.encode(index, local)

    async def last_tick(self, entry: str) -> float | None:
        ticks = [await shard.last_tick(entry) for shard in self.shards]
        return max((t for t in ticks if t is not None), default=None)

    async def settle_and_claim(
        self, settlements: Sequence[CheckedSettlement], claim: ClaimRequest, now: float | None
    ) -> SettleResult:
        """Each shard gets one call with its settlements and its fair share of the claim (from
        a rotating first shard; those that filled their share are then asked for the rest).
        When a shard with settlements cannot be reached, the leases taken are given back and
        PartlySettled is raised; a refusal is raised as it is when nothing was settled
        elsewhere, else as :meth:`_partial` says."""
        settled: list[bool | None] = [None] * len(settlements)  # None: its shard did not answer
        parts: dict[int, list[tuple[int, Settlement]]] = {}
        for position, item in enumerate(settlements):
            found = self.codec.unwrap(item.lease)
            if found is None:
                settled[position] = False  # a forged token: not held
                continue
            settlement = Settlement(found[1], item.outcome, item.delay, item.reason, item.error)
            parts.setdefault(found[0], []).append((position, settlement))
        for index in parts:
            if self._is_down(index):
                raise ConnectionLost(
                    f"shard {index} of sharded queue {self.codec.queue!r} is unreachable "
                    "(nothing was sent)"
                )
        return await self._spread(parts, claim, settled)

    async def _spread(
        self,
        parts: dict[int, list[tuple[int, Settlement]]],
        claim: ClaimRequest,
        settled: list[bool | None],
    ) -> SettleResult:
        taken: list[tuple[int, Lease]] = []
        errors: list[ConnectionLost] = []
        failed_settling: ConnectionLost | None = None
        settled_somewhere = False
        alone = not claim.n and len(parts) == 1  # its errors are raised as they are

        async def ask(index: int, part: list[tuple[int, Settlement]], share: int) -> bool:
            """Send shard *index* its settlements and a claim of *share* (the next holders'
            labels); True if it filled the share. A shard that cannot be reached is noted (a
            claim leaves it out for a while); a refusal gives the leases taken back."""
            nonlocal failed_settling, settled_somewhere
            labels = claim.holders[len(taken) : len(taken) + share]
            # One label for all the shard's leases, or one per lease when they differ.
            holder = [x or "" for x in labels] if len(set(labels)) > 1 else (labels or [None])[0]
            try:
                result = await self.shards[index].settle_and_claim(
                    [s for _, s in part],
                    share,
                    claim.visibility,
                    min_priority=claim.min_priority,
                    holder=holder,
                )
            except ConnectionLost as exc:
                if alone:
                    raise
                if claim.n:
                    self._unreachable(index, exc)
                errors.append(exc)
                failed_settling = failed_settling or (exc if part else None)
                return False
            except PgqueError as exc:
                await self._give_back(taken)
                if not settled_somewhere:
                    raise
                raise self._partial(exc, index, "settle_and_claim") from exc
            self._reached(index)
            settled_somewhere = settled_somewhere or bool(part)
            for (position, _), done in zip(part, result.settled, strict=True):
                settled[position] = done
            taken.extend((index, lease) for lease in result.leases)
            return len(result.leases) == share

        # Only a claim moves the rotation (a settle-only call must not change whose turn it is).
        order = self._rotation() if claim.n else list(range(len(self.shards)))
        full: list[int] = []
        deferred: list[int] = []
        for i, index in enumerate(order):
            part = parts.get(index, [])
            share = fair_share(claim.n - len(taken), len(order) - i)
            if not part and not share:
                continue
            if not part and self._is_down(index):
                deferred.append(index)  # could not be reached lately: asked last, if at all
            elif await ask(index, part, share) and share:
                full.append(index)
        # Shards that filled their share may have more; a shard left out is asked last, only
        # when the others did not fill the claim: an empty answer must mean that every shard
        # was asked and had nothing (a worker stops when idle on it), never "one was skipped".
        for index in full + deferred:
            if len(taken) == claim.n or failed_settling is not None:
                break
            await ask(index, [], claim.n - len(taken))
        queue = self.codec.queue
        if failed_settling is not None:
            await self._give_back(taken)
            raise PartlySettled(
                f"a shard of sharded queue {queue!r} could not be reached while settling "
                f"(settlements on other shards stand): {failed_settling}",
                settled=settled,
            ) from failed_settling
        if claim.n and not taken and errors:
            # Nothing claimed while a shard could not be asked: that is not "empty".
            raise ConnectionLost(
                f"a shard of sharded queue {queue!r} could not be reached and the others "
                f"had nothing to claim: {errors[0]}",
                maybe_applied=settled_somewhere,
            ) from errors[0]
        leases = [self.codec.wrap(index, lease) for index, lease in taken]
        return SettleResult(settled=[bool(done) for done in settled], leases=leases)

    def _reached(self, index: int) -> None:
        if self._down.pop(index, None) is not None:
            log.warning("pgque sharded queue %s: shard %d answers again", self.codec.queue, index)

    def _unreachable(self, index: int, error: ConnectionLost) -> None:
        if index not in self._down:
            log.warning(
                "pgque sharded queue %s: shard %d is unreachable, claims skip it: %s",
                self.codec.queue,
                index,
                error,
            )
        self._down[index] = time.monotonic() + self._down_retry

    async def _give_back(self, taken: list[tuple[int, Lease]]) -> None:
        """Release leases just taken, best effort (a failed call ends at the lease's expiry)."""
        for index, lease in taken:
            with contextlib.suppress(PgqueError):
                await self.shards[index].release(lease)

    async def extend(self, lease: Lease, visibility: float, now: float | None) -> float | None:
        found = self.codec.unwrap(lease)
        if found is None:
            return None  # a forged token: not held
        renewed = await self.shards[found[0]].extend(found[1], visibility)
        return None if renewed is None else renewed.expires_at

    async def dead_letters(self, limit: int, after: int | None) -> list[DeadLetter]:
        pages = []
        for index, shard in enumerate(self.shards):
            page = await shard.dead_letters(limit, after=self.codec.local_after(index, after))
            pages.append([self.codec.dead_letter(index, d) for d in page])
        return merge_by(pages, lambda d: d.id, limit)

    async def redrive(
        self, ids: list[int] | None, in_place: bool, retry_now: bool, now: float | None
    ) -> int:
        parts: dict[int, list[int] | None] = dict.fromkeys(range(len(self.shards)))
        if ids is not None:
            parts = dict(self.codec.split_ids(ids))

        async def redrive(shard: AsyncTransport, local: list[int] | None) -> int:
            return await shard.redrive(local, in_place=in_place, retry_now=retry_now)

        return sum((await self._in_turn(parts, redrive, "redrive")).values())

    async def delete_dead_letters(self, ids: list[int]) -> int:
        async def delete(shard: AsyncTransport, local: list[int]) -> int:
            return await shard.delete_dead_letters(local)

        parts = self.codec.split_ids(ids)
        return sum((await self._in_turn(parts, delete, "delete_dead_letters")).values())

    async def group(self, group_id: str, now: float | None) -> GroupInfo | None:
        index = self.codec.shard_of(group_id)
        info = await self.shards[index].group(group_id)
        return None if info is None else self.codec.group(index, info)

    async def groups(
        self,
        state: GroupStateName | None,
        limit: int,
        after: str | None,
        now: float | None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        pages = []
        for index, shard in enumerate(self.shards):
            page = await shard.groups(state=state, limit=limit, after=after, prefix=prefix)
            pages.append([self.codec.group(index, g) for g in page])
        return merge_by(pages, lambda g: g.group_id.encode("utf-8"), limit)

    async def oldest_groups(
        self, state: GroupStateName | None, limit: int, now: float | None
    ) -> list[GroupInfo]:
        """Each shard's own oldest *limit* merged by (head enqueue time, id bytes): exact,
        since a group lives on one shard and the answer's groups are among their shard's
        oldest."""
        pages = []
        for index, shard in enumerate(self.shards):
            page = await shard.oldest_groups(limit=limit, state=state)
            pages.append([self.codec.group(index, g) for g in page])
        return merge_by(
            pages, lambda g: (g.head_enqueued_at or 0.0, g.group_id.encode("utf-8")), limit
        )

    async def command(
        self, group_id: str, command: GroupCommand, head: int | None, now: float | None
    ) -> bool:
        index = self.codec.shard_of(group_id)
        shard = self.shards[index]
        if command == "pause":
            return await shard.pause(group_id)
        if command == "resume":
            return await shard.resume(group_id)
        if command == "retry_now":
            return await shard.retry_now(group_id)
        if head is not None:  # a logical id: a message of another shard is never the head
            found = self.codec.split_ids([head]).get(index)
            if not found:
                return False
            head = found[0]
        return await shard.unblock(group_id, drop_head=command == "drop_head", head=head)

    async def stats(self, now: float | None) -> QueueStats:
        return merge_stats([await shard.stats() for shard in self.shards])

    # -- fairness keys: each shard applies them to its own groups (global_key_limits off) ------

    def _fair(self) -> list[AsyncSupportsFairness]:
        return [cast(AsyncSupportsFairness, shard) for shard in self.shards]

    async def set_key_policy(self, key: str | None, policy: KeyPolicy) -> None:
        """Store the policy on every shard, one after another (a failure after the first is
        raised as :meth:`_partial` says; setting it again is how to finish)."""

        async def store(shard: AsyncTransport, _: None) -> KeyPolicy:
            fair = cast(AsyncSupportsFairness, shard)
            return await fair.set_key_policy(key, **policy.model_dump())

        await self._in_turn(dict.fromkeys(range(len(self.shards))), store, "set_key_policy")

    async def key_policy(self, key: str | None) -> KeyPolicy | None:
        return await self._fair()[0].key_policy(key)

    async def delete_key_policy(self, key: str | None) -> bool:
        async def drop(shard: AsyncTransport, _: None) -> bool:
            return await cast(AsyncSupportsFairness, shard).delete_key_policy(key)

        parts = dict.fromkeys(range(len(self.shards)))
        return any((await self._in_turn(parts, drop, "delete_key_policy")).values())

    async def key_info(self, key: str, now: float | None) -> KeyInfo | None:
        found = [info for shard in self._fair() if (info := await shard.key_info(key))]
        return merge_key(found) if found else None

    async def keys(self, limit: int, after: str | None, now: float | None) -> list[KeyInfo]:
        return merge_keys([await shard.keys(limit, after=after) for shard in self._fair()], limit)

    async def server_time(self) -> float:
        first = self.shards[0]
        if isinstance(first, AsyncSupportsServerTime):
            return await first.server_time()
        return time.time()

    async def wait_for_messages(self, timeout: float, now: float | None) -> bool:
        """Wait on every shard at once; True as soon as one says True; a shard that cannot be
        reached is left out while the others wait."""
        waiting = [(i, s) for i, s in enumerate(self.shards) if isinstance(s, AsyncSupportsWakeups)]
        return await wait_any([s for _, s in waiting], timeout)  # async-only
        # sync: return self._waits.wait(waiting, timeout)

    async def purge(self) -> None:
        for shard in self.shards:
            if not isinstance(shard, AsyncSupportsPurge):
                raise PgqueError(f"shard {shard!r} cannot purge")
            await shard.purge()

    async def close(self) -> None:
        """Close every shard (all are tried; the first failure is raised); idempotent."""
        if self._closed:
            return
        self._closed = True
        # sync: self._waits.close()
        first: BaseException | None = None
        for shard in self.shards:
            try:
                await shard.close()
            except BaseException as exc:  # a cancellation too: the other shards are closed first
                first = first or exc
        if first is not None:
            raise first


class AsyncShardedTransport(AsyncClient):
    """One logical queue spread over several asyncio transports, the *shards* (asyncio API).

    A group lives on shard ``shard_for(group_id, len(shards))`` for good, so per-group FIFO,
    exclusivity and fencing are each shard's own and hold exactly. Message ids are
    ``local_id * len(shards) + shard``. Claims go round the shards in turn, starting one
    shard further on each call; stats, groups, dead letters and scheduled messages are
    merged; a batch is atomic per shard only. What becomes per shard is declared off in
    :attr:`capabilities`. Shards may be any transports, with the same ``max_attempts`` and
    ``on_exhausted``; *queue* names the logical queue (default: the first shard's). Each
    shard checks events against its own ``max_event_bytes``.

    A shard that cannot be reached (ConnectionLost) is asked last in claims for *down_retry*
    seconds, while the others serve; a claim that gets nothing while a shard could not be
    asked raises ConnectionLost (an empty answer means every shard had nothing), and a
    settlement routed to it fails before any I/O. ``wait_for_messages`` and ``purge`` exist
    when every shard has them (docs/scaling.md). Raises ConfigurationError for an empty or
    invalid list of shards, InvalidInput for a bad *queue* or *down_retry*.
    """

    def __new__(
        cls,
        shards: Sequence[AsyncTransport],
        *,
        queue: str | None = None,
        down_retry: float = DOWN_RETRY_S,
    ) -> AsyncShardedTransport:
        # The optional abilities are methods of the class exactly when every shard has them
        # (``isinstance`` with the wake-ups protocol reads the class): one subclass per mix.
        if cls is AsyncShardedTransport:
            cls = _flavour(*abilities(shards))
        return super().__new__(cls)

    def __init__(
        self,
        shards: Sequence[AsyncTransport],
        *,
        queue: str | None = None,
        down_retry: float = DOWN_RETRY_S,
    ) -> None:
        self._sharded = AsyncShardedDriver(shards, queue, down_retry)
        first = self._sharded.shards[0]
        options = TransportOptions(
            max_attempts=first.max_attempts,
            on_exhausted=first.on_exhausted,
            # The shards' clock times what the front door stamps (a settlement's error).
            clock=getattr(first, "clock", None),
            max_event_bytes=MAX_EVENT_BYTES_LIMIT,  # each shard applies its own
        )
        AsyncClient.__init__(self, self._sharded, options)

    @property
    def queue(self) -> str:
        """The logical queue name (leases carry it)."""
        return self._sharded.codec.queue

    @property
    def shards(self) -> tuple[AsyncTransport, ...]:
        """The shards, in order: shard *k* holds the groups with ``shard_for(g, S) == k``."""
        return tuple(self._sharded.shards)

    def shard_of(self, group_id: str) -> int:
        """Return the index of the shard *group_id* lives on; raises InvalidInput."""
        return self._sharded.codec.shard_of(check_group_id(group_id))

    def _repr_fields(self) -> list[str]:
        return [f"queue={self.queue!r}", f"shards={len(self._sharded.shards)}"]

    async def server_time(self) -> float:
        """Return the first shard's time now (its ``server_time``, else this machine's): one
        clock for every scheduler of the sharded queue."""
        self._check_open()
        return await self._sharded.server_time()


class _AsyncPurge(AsyncShardedTransport):
    """Adds purge to a sharded transport whose shards can all purge."""

    async def purge(self) -> None:
        """Empty every shard's queue (tests, operators), one after another."""
        self._check_open()
        await self._sharded.purge()


@functools.cache
def _flavour(wakeups: bool, purge: bool, fairness: bool) -> type[AsyncShardedTransport]:
    """The class a sharded transport over shards with these abilities is made of: the public
    class with the ability classes of what every shard has (one class per mix, made once)."""
    bases: list[type[AsyncClient]] = [_AsyncPurge if purge else AsyncShardedTransport]
    if wakeups:
        bases.append(AsyncWakeupsClient)
    if fairness:
        bases.append(AsyncFairnessClient)
    if bases == [AsyncShardedTransport]:
        return AsyncShardedTransport
    # What users see (repr, errors) is the public class's name.
    name = AsyncShardedTransport.__name__
    return type(name, tuple(bases), {"__qualname__": name, "__module__": __name__})
