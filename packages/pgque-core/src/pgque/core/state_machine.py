"""The reference state machine: the whole queue contract as pure, synchronous Python.

Every transport must behave like this model (the conformance suite checks it, including a
property test that drives a transport and this model with the same operations). It takes the
current time as an argument and does no I/O, so the rules are easy to read and to test:

- A group is *claimable* when it is not blocked and its ``until`` is unset or ``<= now``.
  ``until`` is the lease expiry while leased, the park end after ``nack(delay)``, and the time
  of the last service after ``ack`` (round-robin key).
- ``claim`` picks the claimable group with the smallest ``(until or 0, group_id)`` among those
  with ``priority >= min_priority``; group ids compare by code point (UTF-8 byte order; Postgres
  uses ``COLLATE "C"``).
- The message's ``attempts`` grows on each delivery. With ``max_attempts`` set, a head that has
  been delivered that many times is *exhausted* when claim reaches it again: it is
  dead-lettered (``dead_letter``) and claim goes on with the group's next message, or its group
  is blocked (``block``) until :meth:`QueueModel.unblock`.
- A lease is held while its token is the group's token, even past ``expires_at``: until
  another claim takes the group, a late ack still succeeds (no one else has the message).
- A drained group is removed, so its priority resets on the next publish.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgque.core.models import DeadLetter, Event, Lease, QueueStats
from pgque.core.validation import OnExhausted

__all__ = [
    "QueueModel",
    "StoredMessage",
    "GroupState",
    "DEFAULT_EXHAUSTED_REASON",
    "OPERATOR_DROP_REASON",
]

DEFAULT_EXHAUSTED_REASON = "max_attempts exhausted"
OPERATOR_DROP_REASON = "dropped by operator (unblock)"


@dataclass
class StoredMessage:
    """One queued message."""

    id: int
    event_json: str
    enqueued_at: float
    attempts: int = 0


@dataclass
class GroupState:
    """One group that has messages."""

    priority: int
    messages: deque[StoredMessage] = field(default_factory=deque)
    token: str | None = None
    until: float | None = None
    blocked: bool = False

    def claimable(self, now: float) -> bool:
        return not self.blocked and (self.until is None or self.until <= now)

    def sort_key(self, group_id: str) -> tuple[float, str]:
        return (0.0 if self.until is None else self.until, group_id)


@dataclass
class _Dead:
    id: int
    group_id: str
    message: StoredMessage
    priority: int
    reason: str
    failed_at: float


class _Unset:
    """Marker type: an argument that was not given."""


_UNSET = _Unset()


def _new_token() -> str:
    return uuid.uuid4().hex


class QueueModel:
    """The contract's state machine for one queue. Not thread-safe; wrap it in a lock."""

    def __init__(
        self,
        *,
        queue: str = "default",
        origin: str = "model",
        max_attempts: int | None = None,
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
        self._next_message_id = 1
        self._next_dead_id = 1

    # -- writes -----------------------------------------------------------------------------

    def publish(self, group_id: str, event_json: str, priority: int, now: float) -> int:
        """Append a message; create the group (fixing its priority) if it has none."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupState(priority=priority)
        message_id = self._next_message_id
        self._next_message_id += 1
        group.messages.append(StoredMessage(message_id, event_json, now))
        return message_id

    def claim(
        self, now: float, visibility: float, min_priority: int, **policy: Any
    ) -> Lease | None:
        """Lease the head of the first claimable group in round-robin order."""
        leases = self.claim_many(1, now, visibility, min_priority, **policy)
        return leases[0] if leases else None

    def claim_many(
        self,
        n: int,
        now: float,
        visibility: float,
        min_priority: int,
        *,
        max_attempts: int | _Unset | None = _UNSET,
        on_exhausted: OnExhausted | None = None,
    ) -> list[Lease]:
        """Lease heads of up to *n* distinct groups, in round-robin order.

        *max_attempts* and *on_exhausted* override the model's own policy for this call.
        """
        limit = self.max_attempts if isinstance(max_attempts, _Unset) else max_attempts
        policy = on_exhausted or self.on_exhausted
        candidates = sorted(
            (g.sort_key(gid), gid)
            for gid, g in self.groups.items()
            if g.priority >= min_priority and g.claimable(now)
        )
        leases: list[Lease] = []
        for _key, group_id in candidates:
            if len(leases) >= n:
                break
            lease = self._lease_group(group_id, now, visibility, limit, policy)
            if lease is not None:
                leases.append(lease)
        return leases

    def _lease_group(
        self,
        group_id: str,
        now: float,
        visibility: float,
        max_attempts: int | None,
        on_exhausted: OnExhausted,
    ) -> Lease | None:
        group = self.groups[group_id]
        while group.messages:
            head = group.messages[0]
            if max_attempts is not None and head.attempts >= max_attempts:
                if on_exhausted == "block":
                    group.blocked = True
                    group.token = None
                    return None
                self._bury(group_id, group, DEFAULT_EXHAUSTED_REASON, now)
                continue
            head.attempts += 1
            group.token = self._new_token()
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
        del self.groups[group_id]
        return None

    def _held(self, lease: Lease) -> GroupState | None:
        group = self.groups.get(lease.group_id)
        if (
            group is None
            or group.token is None
            or group.token != lease.token
            or not group.messages
            or group.messages[0].id != lease.message_id
        ):
            return None
        return group

    def _bury(self, group_id: str, group: GroupState, reason: str, now: float) -> None:
        """Move the head of *group* to the dead letters."""
        head = group.messages.popleft()
        dead_id = self._next_dead_id
        self._next_dead_id += 1
        self.dead[dead_id] = _Dead(dead_id, group_id, head, group.priority, reason, now)

    def _release(self, group_id: str, group: GroupState, until: float) -> None:
        """Free *group* after its head was settled; drop it if drained."""
        if not group.messages:
            del self.groups[group_id]
            return
        group.token = None
        group.until = until

    def ack(self, lease: Lease, now: float) -> bool:
        """Remove the leased head and free its group (round-robin: served now)."""
        group = self._held(lease)
        if group is None:
            return False
        group.messages.popleft()
        self._release(lease.group_id, group, now)
        return True

    def nack(self, lease: Lease, now: float, delay: float) -> bool:
        """Release the lease; the head is claimable again after *delay* seconds."""
        group = self._held(lease)
        if group is None:
            return False
        group.token = None
        group.until = now + delay
        return True

    def extend(self, lease: Lease, now: float, visibility: float) -> Lease | None:
        """Move the held lease's expiry to ``now + visibility``."""
        group = self._held(lease)
        if group is None:
            return None
        group.until = now + visibility
        return lease.model_copy(update={"expires_at": group.until})

    def dead_letter(self, lease: Lease, now: float, reason: str) -> bool:
        """Move the leased head to the dead letters; the group continues."""
        group = self._held(lease)
        if group is None:
            return False
        self._bury(lease.group_id, group, reason, now)
        self._release(lease.group_id, group, now)
        return True

    def redrive(self, ids: Sequence[int] | None, now: float) -> int:
        """Publish dead letters again at their groups' tails; return how many."""
        chosen = sorted(self.dead) if ids is None else sorted(set(ids) & set(self.dead))
        for dead_id in chosen:
            dead = self.dead.pop(dead_id)
            self.publish(dead.group_id, dead.message.event_json, dead.priority, now)
        return len(chosen)

    def unblock(self, group_id: str, now: float, drop_head: bool) -> bool:
        """Release a blocked group: retry its head afresh, or dead-letter it."""
        group = self.groups.get(group_id)
        if group is None or not group.blocked:
            return False
        group.blocked = False
        if drop_head:
            self._bury(group_id, group, OPERATOR_DROP_REASON, now)
            self._release(group_id, group, now)
        else:
            group.messages[0].attempts = 0
            group.token = None
            group.until = now
        return True

    # -- reads ------------------------------------------------------------------------------

    def dead_letters(self, limit: int) -> list[DeadLetter]:
        """Dead letters, oldest first."""
        return [
            DeadLetter(
                id=d.id,
                group_id=d.group_id,
                message_id=d.message.id,
                event=Event.from_json(d.message.event_json),
                priority=d.priority,
                attempts=d.message.attempts,
                reason=d.reason,
                failed_at=d.failed_at,
            )
            for d in (self.dead[i] for i in sorted(self.dead)[:limit])
        ]

    def stats(self, now: float) -> QueueStats:
        """Counts as of *now*."""
        in_flight = parked = blocked = 0
        resume: list[float] = []
        oldest: float | None = None
        messages = 0
        for group in self.groups.values():
            messages += len(group.messages)
            if group.messages:
                first = group.messages[0].enqueued_at
                oldest = first if oldest is None else min(oldest, first)
            if group.blocked:
                blocked += 1
            elif group.until is not None and group.until > now:
                if group.token is not None:
                    in_flight += 1
                else:
                    parked += 1
                    resume.append(group.until)
        return QueueStats(
            groups=len(self.groups),
            messages=messages,
            in_flight=in_flight,
            parked=parked,
            blocked=blocked,
            dead_letters=len(self.dead),
            oldest_age_s=None if oldest is None else max(0.0, now - oldest),
            next_resume_at=min(resume) if resume else None,
        )
