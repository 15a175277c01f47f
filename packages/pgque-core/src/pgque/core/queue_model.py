"""The reference state machine: the whole queue contract as pure, synchronous Python.

Every transport must behave like this model (the conformance suite checks it, including a
property test that drives a transport and this model with the same operations). It takes the
current time as an argument and does no I/O, so the rules are easy to read and to test:

- A group is *claimable* when it is not paused, not blocked and its ``until`` is unset or
  ``<= now``. ``until`` is the lease expiry while leased, the park end after ``nack(delay)``,
  and the time of the last service after ``ack`` / ``release`` / ``nack(delay=0)``
  (round-robin key).
- ``claim`` picks the claimable group with the smallest ``(until or 0, group_id)`` among those
  with ``priority >= min_priority``; group ids compare by code point (UTF-8 byte order; Postgres
  uses ``COLLATE "C"``).
- Order rule: within a group messages are kept in the order they joined it (publish order;
  a scheduled message joins at its due time, so its id may be lower than those ahead of it)
  and a claim always delivers the group's first message (its *head*). A lease is fenced by
  its token **and** its message id: it is held while its token is the group's token and its
  message is still in the group, even past ``expires_at`` (until another claim takes the group
  a late ack still succeeds: no one else has the message). ack / nack / extend / release /
  dead_letter act on the leased message by id, wherever it now stands in the group.
- The message's ``attempts`` grows on each delivery (``release`` takes that delivery back).
  With ``max_attempts`` set, a head that has been delivered that many times is *exhausted* when
  claim reaches it again: it is dead-lettered with the reason
  :func:`~pgque.core.validation.exhausted_reason` and claim goes on with the group's next
  message, or its group is blocked (``block``) until :meth:`QueueModel.unblock`.
- ``nack(error=)`` / ``dead_letter(error=)`` record an :class:`~pgque.core.ErrorInfo` on the
  *message* (``last_error``); every dead letter keeps the given error, else the message's.
- ``pause`` holds a group (creating it empty, priority 0, when absent); a paused group is never
  claimed (so exhaustion is not applied to it) and is kept while empty. A drained group that is
  not paused is removed, so its priority resets on the next publish; a publish into a group
  without messages sets its priority. ``resume`` removes a group left without messages.
- ``redrive(in_place=True)`` puts a dead letter back into its group under its original message
  id, at its original place in the group's order (attempts 0, no last_error);
  ``in_place=False`` publishes it anew at the tail.
- Scheduling: ``schedule`` (a publish with a delay) keeps a message aside, under an id of the
  same sequence, until its ``due_at``; then it joins its group's tail as a publish at
  ``due_at`` would (creating the group, or setting the priority of a group without messages;
  a paused group receives it). Messages falling due join in ``(due_at, id)`` order. Every
  method that takes ``now`` first moves in what is due by then (:meth:`QueueModel.promote`), so
  no call can tell when a due message moved. ``cancel`` drops one whose ``due_at > now``.
- ``publish_tick`` appends its event (an ordinary publish) only when the entry has no recorded
  tick or an earlier one, and records the tick; ``purge`` forgets messages, dead letters,
  scheduled messages and ticks.

Decisions where the issue's text left room (every backend follows them):

- A redriven message (in place or at the tail) is *enqueued at the redrive time*:
  ``GroupInfo.head_enqueued_at`` and ``QueueStats.oldest_age_s`` count from the redrive, as
  with any message entering a group. ``QueueStats.oldest_age_s`` is the age of the oldest
  message of the queue (not only of heads, which may be younger after a redrive).
- In-place redrive into a group that exists keeps its priority, paused and blocked state, even
  when the group has no messages (a paused empty group); only a missing group is created, with
  the dead letter's priority. (A publish or an ``in_place=False`` redrive into a group without
  messages sets its priority, as publishes do.)
- ``unblock`` acts on the group's head, the lowest-id message (after an in-place redrive into
  a blocked group that is the redriven one). ``unblock`` keeps the head's ``last_error``.
- ``release`` takes the delivery back (``attempts - 1``, never below 0), frees the group at
  once (``until = now``), keeps ``last_error`` and clears the holder.
- ``GroupInfo.lease_expires_at`` / ``lease_holder`` are shown whenever a lease token is out
  (even expired), whatever the state; ``resume_at`` whenever no token is out and
  ``until > now`` (a nack delay), whatever the state (a paused group may show one). Only a
  group whose state *is* ``parked`` counts towards ``QueueStats.next_resume_at``.
- ``QueueStats``: each group is counted in exactly one of paused / blocked / in_flight /
  parked (or none when ready), by the state precedence paused > blocked > leased > parked >
  ready.
"""

from __future__ import annotations

import bisect
import heapq
import json
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgque.core.browse import MessageInfo, MessagePage, MessagesQuery, message_info, page_of
from pgque.core.fairness import DEFAULT_KEY, claim_rank, finish_tag, next_token_at, refill
from pgque.core.history import HistoryQuery, HistoryRetention, HistorySetting
from pgque.core.live_workers import (
    PRUNE_AFTER_S,
    WorkerBeat,
    decode_slots,
    encode_slots,
    holds,
    worker_info,
)
from pgque.core.models import (
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
    SettleResult,
    WorkerInfo,
    WorkerLease,
)
from pgque.core.transport_options import OnExhausted
from pgque.core.validation import DEFAULT_MAX_ATTEMPTS, CheckedSettlement, exhausted_reason

__all__ = [
    "QueueModel",
    "StoredMessage",
    "GroupState",
    "DEFAULT_EXHAUSTED_REASON",
    "OPERATOR_DROP_REASON",
]

#: The exhaustion reason before it named the limit; kept for importers. New code uses
#: :func:`~pgque.core.validation.exhausted_reason`.
DEFAULT_EXHAUSTED_REASON = "max_attempts exhausted"
OPERATOR_DROP_REASON = "dropped by operator (unblock)"


@dataclass
class StoredMessage:
    """One queued message."""

    id: int
    event_json: str
    enqueued_at: float
    attempts: int = 0
    last_error: ErrorInfo | None = None
    #: Put back by an in-place redrive: it may be younger than messages behind it.
    redriven: bool = False
    #: Its place in its group's order: the join sequence (0 until it joins a group).
    seq: int = 0


def _message_seq(message: StoredMessage) -> int:
    return message.seq


@dataclass
class _Scheduled:
    """A message published with a delay, not yet in its group."""

    id: int
    group_id: str
    event_json: str
    priority: int
    due_at: float
    enqueued_at: float
    fairness_key: str = DEFAULT_KEY


@dataclass
class GroupState:
    """One group: its messages in join order, its lease, park and operator holds."""

    priority: int
    messages: deque[StoredMessage] = field(default_factory=deque)
    token: str | None = None
    until: float | None = None
    blocked: bool = False
    paused: bool = False
    #: The message id the lease (``token``) was granted on.
    leased_id: int | None = None
    holder: str | None = None
    #: How many messages of the group an in-place redrive put back (see :meth:`oldest`).
    redriven: int = 0
    #: The group's fairness key, fixed like its priority (:mod:`pgque.core.fairness`).
    fairness_key: str = DEFAULT_KEY
    #: When the lease (``token``) was granted: a history record's ``started_at``.
    leased_at: float | None = None

    def claimable(self, now: float) -> bool:
        return not self.paused and not self.blocked and (self.until is None or self.until <= now)

    def sort_key(self, group_id: str) -> tuple[float, str]:
        return (0.0 if self.until is None else self.until, group_id)

    def find(self, message_id: int) -> int | None:
        """Return the index of *message_id* in :attr:`messages`, or None."""
        # Leases are nearly always on the head; a scheduled message's id is out of order, so
        # the rest is a scan.
        for index, message in enumerate(self.messages):
            if message.id == message_id:
                return index
        return None

    def insert(self, message: StoredMessage) -> None:
        """Put *message* in its place by join sequence."""
        if not self.messages or self.messages[-1].seq < message.seq:
            self.messages.append(message)
            return
        index = bisect.bisect_left(self.messages, message.seq, key=_message_seq)
        self.messages.insert(index, message)

    def remove(self, index: int) -> StoredMessage:
        """Take the message at *index* out of the group."""
        message = self.messages[index]
        del self.messages[index]
        if message.redriven:
            self.redriven -= 1
        return message

    def oldest(self) -> float | None:
        """The earliest ``enqueued_at`` of the group's messages.

        Published messages sit in enqueue order, so without redriven ones the head is the
        oldest; otherwise every message is looked at.
        """
        if not self.messages:
            return None
        if not self.redriven:
            return self.messages[0].enqueued_at
        return min(message.enqueued_at for message in self.messages)

    def live_lease(self, now: float) -> bool:
        """Whether a lease on the group is out and unexpired at *now* (it holds a key's slot)."""
        return self.token is not None and self.until is not None and self.until > now

    def state(self, now: float) -> GroupStateName:
        """The group's state at *now*, by precedence paused > blocked > leased > parked."""
        if self.paused:
            return "paused"
        if self.blocked:
            return "blocked"
        if self.until is not None and self.until > now:
            return "leased" if self.token is not None else "parked"
        return "ready"

    def end_lease(self, until: float) -> None:
        """Drop the lease (if any); the group is claimable again from *until*."""
        self.token = None
        self.leased_id = None
        self.holder = None
        self.leased_at = None
        self.until = until


@dataclass
class _WorkerRow:
    """A worker's row (pgque.core.live_workers): its last heartbeat's content and times, its
    slots as the store turned them (held since the heartbeat minus their time held)."""

    beat: WorkerBeat
    started_at: float
    last_heartbeat: float
    slots: str


@dataclass
class _Dead:
    id: int
    group_id: str
    message: StoredMessage
    priority: int
    reason: str
    failed_at: float
    error: ErrorInfo | None
    fairness_key: str = DEFAULT_KEY


@dataclass
class _KeyState:
    """A fairness key's claim history: its finish tag and its token bucket."""

    finish: float = 0.0
    #: Tokens at :attr:`tokens_at`; ``None``: a full bucket.
    tokens: float | None = None
    tokens_at: float | None = None


class _Unset:
    """Marker type: an argument that was not given."""


_UNSET = _Unset()


_NO_POLICY = KeyPolicy()


def _new_token() -> str:
    return uuid.uuid4().hex


def _kind_of(event_json: str) -> str:
    """The ``kind`` of a stored event's JSON text (``""`` when it cannot be read)."""
    try:
        kind = json.loads(event_json).get("kind")
    except (ValueError, AttributeError):
        return ""
    return kind if isinstance(kind, str) else ""


class QueueModel:
    """The contract's state machine for one queue. Not thread-safe; wrap it in a lock."""

    def __init__(
        self,
        *,
        queue: str = "default",
        origin: str = "model",
        max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
        on_exhausted: OnExhausted = "dead_letter",
        new_token: Callable[[], str] = _new_token,
    ) -> None:
        self.queue = queue
        self.origin = origin
        self.max_attempts = max_attempts
        self.on_exhausted: OnExhausted = on_exhausted
        self._new_token = new_token
        self.groups: dict[str, GroupState] = {}
        self.dead: dict[int, _Dead] = {}
        #: Scheduled messages not yet moved into their groups, by id.
        self.pending: dict[int, _Scheduled] = {}
        #: ``(due_at, id)`` of :attr:`pending` (cancelled ones linger until popped).
        self._due: list[tuple[float, int]] = []
        #: The ids of :attr:`pending`, ascending (a new id is the highest, so it goes last).
        #: A cancelled or joined id lingers until a page passes over it or the list holds
        #: twice as many ids as :attr:`pending` (then it is rebuilt): a page bisects to its
        #: first id, so it costs O(log n + limit), amortised.
        self._pending_ids: list[int] = []
        #: The last tick published per schedule entry (``publish_tick``).
        self.ticks: dict[str, float] = {}
        self._next_message_id = 1
        self._next_dead_id = 1
        self._next_seq = 1
        #: Fairness: each key's own policy, the default policy (key None), each key's claim
        #: history, and the virtual clock of the weighted fair share (pgque.core.fairness).
        self.key_policies: dict[str | None, KeyPolicy] = {}
        self._keys: dict[str, _KeyState] = {}
        self._virtual_clock = 0.0
        #: Job history (pgque.core.history): the queue's retention (None: off) and its
        #: records, oldest first.
        self.history_retention: HistoryRetention | None = None
        self._history: deque[HistoryRecord] = deque()
        self._next_history_id = 1
        #: Live workers (pgque.core.live_workers), by id.
        self.workers: dict[str, _WorkerRow] = {}

    # -- scheduling -------------------------------------------------------------------------

    def promote(self, now: float) -> None:
        """Move every scheduled message due by *now* into its group, in ``(due_at, id)`` order."""
        joined = False
        while self._due and self._due[0][0] <= now:
            _due_at, message_id = heapq.heappop(self._due)
            pending = self.pending.pop(message_id, None)
            if pending is not None:
                joined = True
                self._join(
                    pending.group_id,
                    StoredMessage(pending.id, pending.event_json, pending.due_at),
                    pending.priority,
                    pending.fairness_key,
                )
        if joined:
            self._compact_pending_ids()

    def _compact_pending_ids(self) -> None:
        """Rebuild :attr:`_pending_ids` once most of its ids left :attr:`pending`."""
        if len(self._pending_ids) > 2 * len(self.pending) + 64:
            self._pending_ids = [i for i in self._pending_ids if i in self.pending]

    def schedule(
        self,
        group_id: str,
        event_json: str,
        priority: int,
        now: float,
        due_at: float,
        fairness_key: str = DEFAULT_KEY,
    ) -> int:
        """Keep a message aside until *due_at*; return its id (from the publish sequence)."""
        self.promote(now)
        message_id = self._next_message_id
        self._next_message_id += 1
        self.pending[message_id] = _Scheduled(
            message_id, group_id, event_json, priority, due_at, now, fairness_key
        )
        heapq.heappush(self._due, (due_at, message_id))
        self._pending_ids.append(message_id)
        return message_id

    def cancel(self, message_id: int, now: float) -> bool:
        """Drop a scheduled message that is not due at *now*; False otherwise."""
        self.promote(now)
        if self.pending.pop(message_id, None) is None:
            return False
        self._compact_pending_ids()
        return True

    def next_due_at(self) -> float | None:
        """The earliest due time of the scheduled messages, or None."""
        while self._due and self._due[0][1] not in self.pending:
            heapq.heappop(self._due)
        return self._due[0][0] if self._due else None

    def scheduled_page(self, now: float, limit: int, after: int | None) -> list[ScheduledMessage]:
        """Up to *limit* scheduled messages not due at *now*, in id order, id > *after*."""
        self.promote(now)
        kept = self._pending_ids
        start = 0 if after is None else bisect.bisect_right(kept, after)
        ids: list[int] = []
        end = start
        while end < len(kept) and len(ids) < limit:
            if kept[end] in self.pending:
                ids.append(kept[end])
            end += 1
        if end - start > len(ids):
            kept[start:end] = ids  # the ids passed over are gone for good
        out: list[ScheduledMessage] = []
        for message_id in ids:
            pending = self.pending[message_id]
            out.append(
                ScheduledMessage(
                    id=pending.id,
                    group_id=pending.group_id,
                    due_at=pending.due_at,
                    kind=Event.from_json(pending.event_json).kind,
                    priority=pending.priority,
                    enqueued_at=pending.enqueued_at,
                )
            )
        return out

    def publish_tick(
        self,
        entry: str,
        tick: float,
        group_id: str,
        event_json: str,
        priority: int,
        now: float,
        fairness_key: str = DEFAULT_KEY,
    ) -> int | None:
        """Publish tick *tick* of *entry* unless it (or a later one) was; record it."""
        last = self.ticks.get(entry)
        if last is not None and tick <= last:
            return None
        self.ticks[entry] = tick
        return self.publish(group_id, event_json, priority, now, fairness_key)

    def last_tick(self, entry: str) -> float | None:
        """The last tick of *entry* that :meth:`publish_tick` published, or None."""
        return self.ticks.get(entry)

    def purge(self) -> None:
        """Forget every message, group, dead letter, scheduled message, tick and key's claim
        history (ids go on; key policies stay: they are configuration)."""
        self.groups.clear()
        self._keys.clear()
        self.dead.clear()
        self.pending.clear()
        self._due.clear()
        self._pending_ids.clear()
        self.ticks.clear()
        self._history.clear()

    # -- live workers -------------------------------------------------------------------------

    def heartbeat(self, beat: WorkerBeat, now: float) -> None:
        """Register or refresh the worker *beat* describes at *now* (a new row starts now);
        remove the rows of workers silent for longer than ``PRUNE_AFTER_S``."""
        for worker_id in [
            w for w, row in self.workers.items() if now - row.last_heartbeat > PRUNE_AFTER_S
        ]:
            del self.workers[worker_id]
        row = self.workers.get(beat.id)
        started = now if row is None else row.started_at
        self.workers[beat.id] = _WorkerRow(beat, started, now, encode_slots(beat))

    def goodbye(self, worker_id: str) -> bool:
        """Remove the worker's row; False when it had none."""
        return self.workers.pop(worker_id, None) is not None

    def worker_infos(self, include_gone: bool, now: float) -> list[WorkerInfo]:
        """The workers by id (code point order), each with the unexpired leases held in its
        name; only the alive ones unless *include_gone*."""
        infos = []
        for worker_id in sorted(self.workers):
            row = self.workers[worker_id]
            leases = tuple(
                WorkerLease(
                    group_id=group_id,
                    message_id=group.leased_id or 0,
                    holder=group.holder or "",
                    expires_at=group.until or now,
                )
                for group_id, group in self.groups.items()
                if group.live_lease(now) and holds(row.beat.holder, group.holder)
            )
            info = worker_info(
                row.beat,
                queue=self.queue,
                started_at=row.started_at,
                last_heartbeat=row.last_heartbeat,
                slots=decode_slots(row.slots, row.last_heartbeat),
                leases=leases,
                now=now,
            )
            if include_gone or info.alive:
                infos.append(info)
        return infos

    # -- history ----------------------------------------------------------------------------

    def set_history(self, setting: HistorySetting) -> None:
        """Turn the queue's history on with a retention, or off (what was recorded stays,
        until a later retention prunes it or a purge)."""
        self.history_retention = setting if isinstance(setting, HistoryRetention) else None

    def _record(
        self,
        outcome: HistoryOutcome,
        group_id: str,
        key: str,
        message: StoredMessage,
        now: float,
        *,
        lease: GroupState | None,
        error: ErrorInfo | None = None,
        reason: str | None = None,
    ) -> None:
        """Append one record when the queue's history is on; drop what falls out. *lease*:
        the group whose lease the record is about (its start and holder), None without one."""
        retention = self.history_retention
        if retention is None:
            return
        record = HistoryRecord(
            id=self._next_history_id,
            message_id=message.id,
            group_id=group_id,
            kind=_kind_of(message.event_json),
            fairness_key=key or None,
            outcome=outcome,
            attempt=message.attempts,
            published_at=message.enqueued_at,
            started_at=None if lease is None else lease.leased_at,
            finished_at=now,
            worker=None if lease is None else lease.holder,
            error=error,
            reason=reason,
        )
        self._next_history_id += 1
        self._history.append(record)
        self._prune_history(retention, now)

    def _prune_history(self, retention: HistoryRetention, now: float) -> None:
        records = self._history
        if retention.max_rows is not None:
            while len(records) > retention.max_rows:
                records.popleft()
        oldest = retention.oldest_kept(now)
        if oldest is not None:
            while records and records[0].finished_at < oldest:
                records.popleft()

    def history(self, query: HistoryQuery, now: float) -> list[HistoryRecord]:
        """The records *query* asks for, newest first, within the retention at *now*."""
        retention = self.history_retention
        oldest = None if retention is None else retention.oldest_kept(now)
        out: list[HistoryRecord] = []
        for record in reversed(self._history):
            if oldest is not None and record.finished_at < oldest:
                break
            if query.matches(record):
                out.append(record)
                if len(out) == query.limit:
                    break
        return out

    # -- writes -----------------------------------------------------------------------------

    def _join(
        self, group_id: str, message: StoredMessage, priority: int, fairness_key: str
    ) -> None:
        """Append *message* to *group_id*'s tail; a group without messages takes *priority*
        and *fairness_key*."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupState(priority, fairness_key=fairness_key)
        elif not group.messages:
            group.priority = priority
            group.fairness_key = fairness_key
        message.seq = self._next_seq
        self._next_seq += 1
        group.messages.append(message)

    def publish(
        self,
        group_id: str,
        event_json: str,
        priority: int,
        now: float,
        fairness_key: str = DEFAULT_KEY,
    ) -> int:
        """Append a message; a group without messages (new or paused) takes *priority* and
        *fairness_key*."""
        self.promote(now)
        message_id = self._next_message_id
        self._next_message_id += 1
        self._join(group_id, StoredMessage(message_id, event_json, now), priority, fairness_key)
        return message_id

    def claim(
        self,
        now: float,
        visibility: float,
        min_priority: int,
        *,
        holder: str | None = None,
        **policy: Any,
    ) -> Lease | None:
        """Lease the head of the first claimable group in round-robin order."""
        leases = self.claim_many(1, now, visibility, min_priority, holder=holder, **policy)
        return leases[0] if leases else None

    def claim_many(
        self,
        n: int,
        now: float,
        visibility: float,
        min_priority: int,
        *,
        holder: str | Sequence[str | None] | None = None,
        max_attempts: int | _Unset | None = _UNSET,
        on_exhausted: OnExhausted | None = None,
    ) -> list[Lease]:
        """Lease heads of up to *n* distinct groups, in round-robin order.

        *holder* labels the leases (``GroupInfo.lease_holder``): one label for all, or a
        sequence giving lease *i* the label *i*. *max_attempts* and *on_exhausted* override
        the model's own policy for this call.
        """
        self.promote(now)
        holders = [holder] * n if holder is None or isinstance(holder, str) else list(holder)
        limit = self.max_attempts if isinstance(max_attempts, _Unset) else max_attempts
        policy = on_exhausted or self.on_exhausted
        candidates = sorted(
            (g.sort_key(gid), gid)
            for gid, g in self.groups.items()
            if g.priority >= min_priority and g.claimable(now)
        )
        # Each key's claimable groups in round-robin order; keys are served by fair share.
        queues: dict[str, deque[str]] = {}
        for _order, group_id in candidates:
            queues.setdefault(self.groups[group_id].fairness_key, deque()).append(group_id)
        # Live leases per key matter only under a cap: without one, no scan of every group.
        in_flight: dict[str, int] = {}
        if any(p.max_in_flight is not None for p in self.key_policies.values()):
            for group in self.groups.values():
                if group.live_lease(now):
                    in_flight[group.fairness_key] = in_flight.get(group.fairness_key, 0) + 1
        leases: list[Lease] = []
        while len(leases) < n:
            chosen = self._next_key(queues, in_flight, now)
            if chosen is None:
                break
            key, start = chosen
            group_id = queues[key].popleft()
            if not queues[key]:
                del queues[key]
            label = holders[len(leases)]
            lease = self._lease_group(group_id, now, visibility, limit, policy, label)
            if lease is not None:
                leases.append(lease)
                self._charge(key, start, now)
                in_flight[key] = in_flight.get(key, 0) + 1
        return leases

    # -- fairness keys (pgque.core.fairness) ------------------------------------------------

    def policy_of(self, key: str) -> KeyPolicy:
        """The policy claims obey for *key*: its own, else the default, else the defaults."""
        return self.key_policies.get(key) or self.key_policies.get(None) or _NO_POLICY

    def _tokens(self, key: str, policy: KeyPolicy, now: float) -> float:
        state = self._keys.get(key)
        if state is None:
            return refill(policy, None, None, now)
        return refill(policy, state.tokens, state.tokens_at, now)

    def _next_key(
        self, queues: dict[str, deque[str]], in_flight: dict[str, int], now: float
    ) -> tuple[str, float] | None:
        """The key the next claim goes to and its start tag; None if no key may claim.

        Keys at their cap or without a whole token leave *queues* for this claim.
        """
        best: tuple[tuple[float, float, bytes], str] | None = None
        for key in list(queues):
            policy = self.policy_of(key)
            cap = policy.max_in_flight
            if (cap is not None and in_flight.get(key, 0) >= cap) or (
                self._tokens(key, policy, now) < 1.0
            ):
                del queues[key]
                continue
            state = self._keys.get(key)
            finish = 0.0 if state is None else state.finish
            rank = claim_rank(finish, self._virtual_clock, key)
            if best is None or rank < best[0]:
                best = (rank, key)
        return None if best is None else (best[1], best[0][0])

    def _charge(self, key: str, start: float, now: float) -> None:
        """Record a claim of *key* that started at *start*: its finish tag, the virtual clock
        and, under a rate, one token."""
        policy = self.policy_of(key)
        state = self._keys.setdefault(key, _KeyState())
        self._virtual_clock = max(self._virtual_clock, start)
        state.finish = finish_tag(start, policy.weight)
        if policy.rate is not None:
            state.tokens = self._tokens(key, policy, now) - 1.0
            # A claim timed before the last charge refilled nothing (refill): the bucket's
            # time stays where it was, so that interval is not refilled a second time.
            state.tokens_at = now if state.tokens_at is None else max(state.tokens_at, now)

    def set_key_policy(self, key: str | None, policy: KeyPolicy) -> None:
        """Give *key* (``None``: every key without one) *policy*."""
        self.key_policies[key] = policy

    def delete_key_policy(self, key: str | None) -> bool:
        """Drop *key*'s own policy (``None``: the default); True if there was one."""
        return self.key_policies.pop(key, None) is not None

    def key_info(self, key: str, now: float) -> KeyInfo | None:
        """*key* as :meth:`keys_page` lists it, or None if it is not listed."""
        self.promote(now)
        return self._key_infos(now, [key])[0] if key in self._listed(now) else None

    def _listed(self, now: float) -> set[str]:
        """The keys :meth:`keys_page` lists: with a group that has messages or a live lease,
        or with a policy of their own."""
        names = {k for k in self.key_policies if k is not None}
        for group in self.groups.values():
            if group.messages or group.live_lease(now):
                names.add(group.fairness_key)
        return names

    def keys_page(self, now: float, limit: int, after: str | None) -> list[KeyInfo]:
        """Up to *limit* keys (with groups, or with a policy of their own) after *after*, in
        UTF-8 byte order; the default key ``""`` first."""
        self.promote(now)
        ordered = sorted(self._listed(now), key=lambda name: name.encode("utf-8"))
        if after is not None:
            ordered = [k for k in ordered if k.encode("utf-8") > after.encode("utf-8")]
        return self._key_infos(now, ordered[:limit])

    def _key_infos(self, now: float, keys: list[str]) -> list[KeyInfo]:
        """The :class:`KeyInfo` of each of *keys* at *now*."""
        wanted = set(keys)
        counts: dict[str, list[Any]] = {}
        for group in self.groups.values():
            if group.fairness_key not in wanted:
                continue
            row = counts.setdefault(group.fairness_key, [0, 0, 0, None])
            row[0] += 1 if group.live_lease(now) else 0
            row[1] += 1 if group.messages else 0
            row[2] += len(group.messages)
            first = group.oldest()
            if first is not None and (row[3] is None or first < row[3]):
                row[3] = first
        out: list[KeyInfo] = []
        for key in keys:
            policy = self.policy_of(key)
            in_flight, groups, messages, oldest = counts.get(key, [0, 0, 0, None])
            tokens = None if policy.rate is None else self._tokens(key, policy, now)
            out.append(
                KeyInfo(
                    key=key,
                    policy=policy,
                    own_policy=key in self.key_policies,
                    in_flight=in_flight,
                    groups=groups,
                    messages=messages,
                    oldest_age_s=None if oldest is None else max(0.0, now - oldest),
                    tokens=tokens,
                    next_token_at=None if tokens is None else next_token_at(policy, tokens, now),
                )
            )
        return out

    def _lease_group(
        self,
        group_id: str,
        now: float,
        visibility: float,
        max_attempts: int | None,
        on_exhausted: OnExhausted,
        holder: str | None,
    ) -> Lease | None:
        group = self.groups[group_id]
        while group.messages:
            head = group.messages[0]
            if max_attempts is not None and head.attempts >= max_attempts:
                if on_exhausted == "block":
                    group.blocked = True
                    group.token = None
                    group.leased_id = None
                    group.holder = None
                    return None
                self._bury(
                    group_id, group, 0, exhausted_reason(max_attempts), now, None, "exhausted"
                )
                continue
            head.attempts += 1
            group.token = self._new_token()
            group.leased_id = head.id
            group.holder = holder
            group.leased_at = now
            group.until = now + visibility
            return Lease(
                group_id=group_id,
                message_id=head.id,
                event=Event.from_json(head.event_json),
                token=group.token,
                priority=group.priority,
                attempt=head.attempts,
                expires_at=group.until,
                queue=self.queue,
                origin=self.origin,
            )
        del self.groups[group_id]  # only a group that is not paused is claimed
        return None

    def _held(self, lease: Lease, now: float) -> tuple[GroupState, int] | None:
        """The group and the index of the leased message, if *lease* is held (at *now*)."""
        self.promote(now)
        group = self.groups.get(lease.group_id)
        if (
            group is None
            or group.token is None
            or group.token != lease.token
            or group.leased_id != lease.message_id
        ):
            return None
        index = group.find(lease.message_id)
        return None if index is None else (group, index)

    def _bury(
        self,
        group_id: str,
        group: GroupState,
        index: int,
        reason: str,
        now: float,
        error: ErrorInfo | None,
        outcome: HistoryOutcome = "dead_lettered",
    ) -> None:
        """Move the message at *index* of *group* to the dead letters.

        The dead letter keeps *error*, else the message's last recorded error. The history
        records *outcome*: a delivery's ``dead_lettered`` (its lease's worker and start) or
        ``exhausted``, and an operator's drop (no lease) as ``dead_lettered``.
        """
        message = group.messages[index]
        leased = outcome == "dead_lettered" and group.leased_id == message.id
        self._record(
            outcome,
            group_id,
            group.fairness_key,
            message,
            now,
            lease=group if leased else None,
            error=error if error is not None else message.last_error,
            reason=reason,
        )
        message = group.remove(index)
        dead_id = self._next_dead_id
        self._next_dead_id += 1
        self.dead[dead_id] = _Dead(
            dead_id,
            group_id,
            message,
            group.priority,
            reason,
            now,
            error if error is not None else message.last_error,
            group.fairness_key,
        )

    def _settled(self, group_id: str, group: GroupState, until: float) -> None:
        """Free *group* after its leased message left it; drop it if drained (unless paused)."""
        if not group.messages and not group.paused:
            del self.groups[group_id]
            return
        group.end_lease(until)

    def ack(self, lease: Lease, now: float) -> bool:
        """Remove the leased message and free its group (round-robin: served now)."""
        held = self._held(lease, now)
        if held is None:
            return False
        group, index = held
        message = group.messages[index]
        self._record("acked", lease.group_id, group.fairness_key, message, now, lease=group)
        group.remove(index)
        self._settled(lease.group_id, group, now)
        return True

    def nack(self, lease: Lease, now: float, delay: float, error: ErrorInfo | None = None) -> bool:
        """End the lease; the group is claimable again after *delay* seconds.

        The delivery counts. *error* becomes the message's ``last_error`` (None keeps it).
        """
        held = self._held(lease, now)
        if held is None:
            return False
        group, index = held
        message = group.messages[index]
        if error is not None:
            message.last_error = error
        self._record(
            "nacked", lease.group_id, group.fairness_key, message, now, lease=group, error=error
        )
        group.end_lease(now + delay)
        return True

    def release(self, lease: Lease, now: float) -> bool:
        """End the lease without counting the delivery; the group is claimable at once."""
        held = self._held(lease, now)
        if held is None:
            return False
        group, index = held
        message = group.messages[index]
        self._record("released", lease.group_id, group.fairness_key, message, now, lease=group)
        message.attempts = max(0, message.attempts - 1)
        group.end_lease(now)
        return True

    def extend(self, lease: Lease, now: float, visibility: float) -> Lease | None:
        """Move the held lease's expiry to ``now + visibility``."""
        held = self._held(lease, now)
        if held is None:
            return None
        group, _index = held
        group.until = now + visibility
        return lease.model_copy(update={"expires_at": group.until})

    def dead_letter(
        self, lease: Lease, now: float, reason: str, error: ErrorInfo | None = None
    ) -> bool:
        """Move the leased message to the dead letters; the group continues.

        The dead letter keeps *error*, else the message's last recorded error.
        """
        held = self._held(lease, now)
        if held is None:
            return False
        group, index = held
        self._bury(lease.group_id, group, index, reason, now, error)
        self._settled(lease.group_id, group, now)
        return True

    def settle(self, item: CheckedSettlement, now: float) -> bool:
        """Apply one checked settlement as its ack/nack/release/dead_letter would."""
        if item.outcome == "ack":
            return self.ack(item.lease, now)
        if item.outcome == "nack":
            return self.nack(item.lease, now, item.delay, item.error)
        if item.outcome == "release":
            return self.release(item.lease, now)
        return self.dead_letter(item.lease, now, item.reason, item.error)

    def settle_and_claim(
        self,
        settlements: Sequence[CheckedSettlement],
        n: int,
        now: float,
        visibility: float,
        min_priority: int,
        *,
        holder: str | Sequence[str | None] | None = None,
        max_attempts: int | _Unset | None = _UNSET,
        on_exhausted: OnExhausted | None = None,
    ) -> SettleResult:
        """Apply *settlements* in order, then lease up to *n* heads as ``claim_many`` does."""
        self.promote(now)
        settled = [self.settle(item, now) for item in settlements]
        leases = (
            self.claim_many(
                n,
                now,
                visibility,
                min_priority,
                holder=holder,
                max_attempts=max_attempts,
                on_exhausted=on_exhausted,
            )
            if n
            else []
        )
        return SettleResult(settled, leases)

    def redrive(
        self,
        ids: Sequence[int] | None,
        now: float,
        in_place: bool = True,
        retry_now: bool = False,
    ) -> int:
        """Return dead letters (all when *ids* is None) to their groups; return how many.

        In place: under the original message id, at its original place in the group, attempts 0
        and the dead letter's error as its last error; a missing group is created with the dead
        letter's priority, an existing one keeps its priority, holds and retry delay (ended
        when *retry_now*). Otherwise: published anew at the tail.
        """
        self.promote(now)
        chosen = sorted(self.dead) if ids is None else sorted(set(ids) & set(self.dead))
        for dead_id in chosen:
            dead = self.dead.pop(dead_id)
            self._record(
                "redriven",
                dead.group_id,
                dead.fairness_key,
                dead.message,
                now,
                lease=None,
                error=dead.error,
                reason=dead.reason,
            )
            if not in_place:
                self.publish(
                    dead.group_id, dead.message.event_json, dead.priority, now, dead.fairness_key
                )
                continue
            group = self.groups.get(dead.group_id)
            if group is None:
                group = self.groups[dead.group_id] = GroupState(
                    dead.priority, fairness_key=dead.fairness_key
                )
            group.insert(
                StoredMessage(
                    dead.message.id,
                    dead.message.event_json,
                    now,
                    redriven=True,
                    seq=dead.message.seq,
                    last_error=dead.error,
                )
            )
            group.redriven += 1
            if retry_now:
                self._end_delay(group, now)
        return len(chosen)

    def delete_dead_letters(self, ids: Sequence[int]) -> int:
        """Delete the dead letters with these ids; return how many existed."""
        gone = set(ids) & set(self.dead)
        for dead_id in gone:
            del self.dead[dead_id]
        return len(gone)

    def unblock(self, group_id: str, now: float, drop_head: bool, head: int | None = None) -> bool:
        """Release a blocked group: retry its head afresh, or dead-letter it; with *head*, only
        if that message is the group's head."""
        self.promote(now)
        group = self.groups.get(group_id)
        if group is None or not group.blocked:
            return False
        if head is not None and (not group.messages or group.messages[0].id != head):
            return False
        group.blocked = False
        if drop_head:
            self._bury(group_id, group, 0, OPERATOR_DROP_REASON, now, None)
            self._settled(group_id, group, now)
        else:
            group.messages[0].attempts = 0
            group.end_lease(now)
        return True

    def retry_now(self, group_id: str, now: float) -> bool:
        """End the retry delay *group_id* waits out; False if it waits for none."""
        self.promote(now)
        group = self.groups.get(group_id)
        if group is None or group.blocked:
            return False
        return self._end_delay(group, now)

    @staticmethod
    def _end_delay(group: GroupState, now: float) -> bool:
        """Make a group parked by a retry delay claimable at *now*; False if it is not parked
        (leased, or not waiting)."""
        if group.token is not None or group.until is None or group.until <= now:
            return False
        group.until = now
        return True

    def pause(self, group_id: str, now: float | None = None) -> bool:
        """Hold *group_id* (creating it empty when absent); False if it was paused already.

        With *now*, what is due by then moves in first.
        """
        if now is not None:
            self.promote(now)
        group = self.groups.get(group_id)
        if group is None:
            self.groups[group_id] = GroupState(priority=0, paused=True)
            return True
        if group.paused:
            return False
        group.paused = True
        return True

    def resume(self, group_id: str, now: float | None = None) -> bool:
        """Lift the hold; a group without messages is removed. False if it was not paused.

        With *now*, what is due by then moves in first.
        """
        if now is not None:
            self.promote(now)
        group = self.groups.get(group_id)
        if group is None or not group.paused:
            return False
        group.paused = False
        if not group.messages:
            del self.groups[group_id]
        return True

    # -- reads ------------------------------------------------------------------------------

    def _dead_letter(self, dead: _Dead) -> DeadLetter:
        return DeadLetter(
            id=dead.id,
            group_id=dead.group_id,
            message_id=dead.message.id,
            event=Event.from_json(dead.message.event_json),
            priority=dead.priority,
            attempts=dead.message.attempts,
            reason=dead.reason,
            failed_at=dead.failed_at,
            error=dead.error,
        )

    def dead_letters(self, limit: int, after: int | None = None) -> list[DeadLetter]:
        """Dead letters with id > *after*, oldest first, at most *limit*."""
        ids = sorted(i for i in self.dead if after is None or i > after)
        return [self._dead_letter(self.dead[i]) for i in ids[:limit]]

    def group(self, group_id: str, now: float) -> GroupInfo | None:
        """Everything about *group_id* at *now*, or None if there is no such group."""
        self.promote(now)
        group = self.groups.get(group_id)
        return None if group is None else self._info(group_id, group, now)

    def groups_page(
        self,
        now: float,
        state: GroupStateName | None = None,
        limit: int = 100,
        after: str | None = None,
        prefix: str | None = None,
    ) -> list[GroupInfo]:
        """Up to *limit* groups with id > *after* in code point order, only in *state* if given
        and only those whose id starts with *prefix* if given."""
        self.promote(now)
        out: list[GroupInfo] = []
        for group_id in sorted(self.groups):
            if after is not None and group_id <= after:
                continue
            if prefix is not None and not group_id.startswith(prefix):
                continue
            info = self._info(group_id, self.groups[group_id], now)
            if state is None or info.state == state:
                out.append(info)
                if len(out) >= limit:
                    break
        return out

    def oldest_groups(
        self, now: float, state: GroupStateName | None = None, limit: int = 10
    ) -> list[GroupInfo]:
        """Up to *limit* groups holding a message, by (head enqueue time, id in code point
        order), only in *state* if given."""
        self.promote(now)
        infos = [
            self._info(group_id, group, now)
            for group_id, group in self.groups.items()
            if group.messages
        ]
        chosen = [i for i in infos if state is None or i.state == state]
        chosen.sort(key=lambda i: (i.head_enqueued_at or 0.0, i.group_id))
        return chosen[:limit]

    # -- browse and search (pgque.core.browse) --------------------------------------------------

    @staticmethod
    def _message_info(group_id: str, message: StoredMessage, is_head: bool) -> MessageInfo:
        return message_info(
            message_id=message.id,
            group_id=group_id,
            event_json=message.event_json,
            enqueued_at=message.enqueued_at,
            is_head=is_head,
            attempts=message.attempts,
        )

    def messages_page(self, query: MessagesQuery, now: float) -> MessagePage:
        """A page of messages by the rules of :mod:`pgque.core.browse`: a group's in its order
        (cursor: the join sequence), or the queue's in id order (cursor: the message id),
        only those of ``query.kind`` when given, at most ``SCAN_ROWS`` examined."""
        self.promote(now)
        rows: list[tuple[int, tuple[str, StoredMessage, bool]]]
        if query.group_id is not None:
            group = self.groups.get(query.group_id)
            members = [] if group is None else list(group.messages)
            rows = [
                (m.seq, (query.group_id, m, index == 0))
                for index, m in enumerate(members)
                if query.after is None or m.seq > query.after
            ]
        else:
            rows = sorted(
                (
                    (m.id, (group_id, m, index == 0))
                    for group_id, group in self.groups.items()
                    for index, m in enumerate(group.messages)
                    if query.after is None or m.id > query.after
                ),
                key=lambda row: row[0],
            )
        kind = query.kind
        kept, next_after = page_of(
            rows, lambda row: kind is None or _kind_of(row[1].event_json) == kind, query.limit
        )
        return MessagePage(
            items=[self._message_info(g, m, head) for g, m, head in kept], next_after=next_after
        )

    def message(self, message_id: int, now: float) -> MessageInfo | None:
        """The message *message_id* in a group or scheduled, or None."""
        self.promote(now)
        pending = self.pending.get(message_id)
        if pending is not None:
            return message_info(
                message_id=pending.id,
                group_id=pending.group_id,
                event_json=pending.event_json,
                enqueued_at=pending.enqueued_at,
                is_head=False,
                due_at=pending.due_at,
            )
        for group_id, group in self.groups.items():
            index = group.find(message_id)
            if index is not None:
                return self._message_info(group_id, group.messages[index], index == 0)
        return None

    def group_scheduled(
        self, group_id: str, now: float, limit: int, after: int | None
    ) -> list[ScheduledMessage]:
        """Up to *limit* of *group_id*'s scheduled messages not due at *now*, in id order,
        id > *after*."""
        self.promote(now)
        ids = sorted(
            p.id
            for p in self.pending.values()
            if p.group_id == group_id and (after is None or p.id > after)
        )
        return [
            ScheduledMessage(
                id=p.id,
                group_id=p.group_id,
                due_at=p.due_at,
                kind=Event.from_json(p.event_json).kind,
                priority=p.priority,
                enqueued_at=p.enqueued_at,
            )
            for p in (self.pending[i] for i in ids[:limit])
        ]

    @staticmethod
    def _info(group_id: str, group: GroupState, now: float) -> GroupInfo:
        state = group.state(now)
        head = group.messages[0] if group.messages else None
        leased = group.token is not None
        waiting = not leased and group.until is not None and group.until > now
        return GroupInfo(
            group_id=group_id,
            state=state,
            depth=len(group.messages),
            priority=group.priority,
            head_message_id=None if head is None else head.id,
            head_enqueued_at=None if head is None else head.enqueued_at,
            head_attempts=0 if head is None else head.attempts,
            lease_expires_at=group.until if leased else None,
            lease_holder=group.holder if leased else None,
            resume_at=group.until if waiting else None,
            last_error=None if head is None else head.last_error,
            fairness_key=group.fairness_key or None,
        )

    def stats(self, now: float) -> QueueStats:
        """Counts as of *now*."""
        self.promote(now)
        counts: dict[GroupStateName, int] = {
            "ready": 0,
            "leased": 0,
            "parked": 0,
            "blocked": 0,
            "paused": 0,
        }
        resume: list[float] = []
        oldest: float | None = None
        messages = 0
        for group in self.groups.values():
            messages += len(group.messages)
            first = group.oldest()
            if first is not None and (oldest is None or first < oldest):
                oldest = first
            state = group.state(now)
            counts[state] += 1
            if state == "parked" and group.until is not None:
                resume.append(group.until)
        return QueueStats(
            groups=len(self.groups),
            messages=messages,
            in_flight=counts["leased"],
            parked=counts["parked"],
            blocked=counts["blocked"],
            paused=counts["paused"],
            dead_letters=len(self.dead),
            oldest_age_s=None if oldest is None else max(0.0, now - oldest),
            next_resume_at=min(resume) if resume else None,
            scheduled=len(self.pending),
            next_due_at=self.next_due_at(),
        )
