"""Script replies into pgque's models: leases, dead letters, groups, stats, scheduled
messages; stored text that does not decode is shown, never fatal (:mod:`pgque.core.stored`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pgque.core.fairness import next_token_at
from pgque.core.live_workers import worker_infos_of_rows
from pgque.core.models import (
    GROUP_STATES,
    DeadLetter,
    GroupInfo,
    GroupStateName,
    KeyInfo,
    KeyPolicy,
    Lease,
    QueueStats,
    ScheduledMessage,
    WorkerInfo,
)
from pgque.core.stored import (
    claimed_lease,
    dead_letter,
    decode_policy,
    group_info,
    queue_stats,
    readable,
    scheduled_message,
)
from pgque.core.stored import reply_text as text

__all__ = [
    "text",
    "Undecodable",
    "decode_leases",
    "decode_dead_letters",
    "decode_stats",
    "decode_scheduled",
    "decode_group",
    "decode_groups_page",
    "due_in",
    "decode_key_infos",
    "decode_workers",
]


@dataclass(frozen=True)
class Undecodable:
    """A claimed head whose stored event could not be decoded: its lease's fields as Redis sent
    them (bytes or str), to hand back to the dead-letter script unchanged."""

    group_id: str | bytes
    message_id: str | bytes
    token: str | bytes
    reason: str


def decode_leases(
    raw: Sequence[Any], queue: str, origin: str
) -> tuple[list[Lease], list[Undecodable]]:
    """Turn the claim script's flat reply (7 strings per lease) into leases, one at a time.

    A head whose message id or event does not decode (text written by hand or damaged) is
    returned apart as an :class:`Undecodable`, so the caller can dead-letter it through its
    lease and still hand out the others.
    """
    leases: list[Lease] = []
    bad: list[Undecodable] = []
    for i in range(0, len(raw), 7):
        lease = claimed_lease(raw[i : i + 7], queue, origin)
        if isinstance(lease, str):
            bad.append(Undecodable(raw[i], raw[i + 1], raw[i + 3], lease))
        else:
            leases.append(lease)
    return leases, bad


def _int_or_zero(value: object) -> int:
    try:
        return int(text(value))
    except ValueError:
        return 0  # ids start at 1: 0 says the stored id was no message id


def decode_dead_letters(raw: Sequence[Any]) -> list[DeadLetter]:
    """Turn the dead_letters script's flat reply (9 strings each) into DeadLetter objects.

    A dead letter whose stored event does not decode shows the stand-in event of
    :func:`~pgque.core.stored.stand_in_event` (the store keeps the text as it was); a stored
    message id that is no integer shows as 0; a group id or reason that is not UTF-8 (such
    heads are dead-lettered on purpose) shows its bad bytes escaped (``\\xff``).
    """
    return [
        dead_letter(
            (
                int(text(raw[i])),
                readable(raw[i + 1]),
                _int_or_zero(raw[i + 2]),
                raw[i + 3],
                int(text(raw[i + 4])),
                int(text(raw[i + 5])),
                readable(raw[i + 6]),
                float(text(raw[i + 7])),
                raw[i + 8] or None,
            )
        )
        for i in range(0, len(raw), 9)
    ]


def decode_stats(raw: Sequence[Any]) -> QueueStats:
    """Turn the stats script's reply into QueueStats (its 9th string: the script's now, which
    makes the oldest message's enqueue time an age)."""
    items = [text(v) for v in raw]
    counts = [int(item) for item in items[:6]]
    now = float(items[8])
    oldest = None if not items[6] else max(0.0, now - float(items[6]))
    resume, due = (float(item) if item else None for item in (items[7], items[11]))
    return queue_stats((*counts, oldest, resume, int(items[9]), int(items[10]), due))


#: Strings per message in the scheduled script's reply.
_SCHEDULED_FIELDS = 6


def decode_scheduled(raw: Sequence[Any]) -> list[ScheduledMessage]:
    """Turn the scheduled script's flat reply (6 strings each) into ScheduledMessage objects.

    A stored event that does not decode shows the kind ``pgque.undecodable``.
    """
    return [
        scheduled_message(
            (
                int(text(raw[i])),
                readable(raw[i + 1]),
                float(text(raw[i + 2])),
                raw[i + 3],
                int(text(raw[i + 4])),
                float(text(raw[i + 5])),
            )
        )
        for i in range(0, len(raw), _SCHEDULED_FIELDS)
    ]


#: How long past its due time an idle wait for a scheduled message lasts (seconds), so that the
#: message is due when the waiter claims; also the shortest such wait (DueWait's floor).
DUE_MARGIN = 0.001


def due_in(reply: Sequence[Any]) -> float | None:
    """Return the seconds until the next scheduled message is due and :data:`DUE_MARGIN`
    past it, from the next_due script's *reply*; None when nothing is scheduled."""
    due = text(reply[0])
    return float(due) - float(text(reply[1])) + DUE_MARGIN if due else None


_STATES: dict[str, GroupStateName] = {state: state for state in GROUP_STATES}
#: Strings per group in the group and groups scripts' replies.
_GROUP_FIELDS = 12


def _optional_float(value: object) -> float | None:
    shown = text(value)
    return float(shown) if shown else None


def _group_info(raw: Sequence[Any], i: int) -> GroupInfo:
    head = text(raw[i + 4]) if raw[i + 4] not in ("", b"") else None
    return group_info(
        (
            readable(raw[i]),
            _STATES[text(raw[i + 1])],
            int(text(raw[i + 2])),
            int(text(raw[i + 3])),
            None if head is None else _int_or_zero(head),
            _optional_float(raw[i + 5]),
            int(text(raw[i + 6])),
            _optional_float(raw[i + 7]),
            readable(raw[i + 8]) or None,
            _optional_float(raw[i + 9]),
            raw[i + 10] or None,
            readable(raw[i + 11]),
        )
    )


def decode_group(raw: Sequence[Any]) -> GroupInfo | None:
    """Turn the group script's reply (12 strings, or none) into a GroupInfo or None."""
    return _group_info(raw, 0) if raw else None


def decode_groups_page(raw: Sequence[Any]) -> tuple[bool, bytes | str | None, list[GroupInfo]]:
    """Turn one groups script reply into (index ended, last id examined or None, groups)."""
    ended = text(raw[0]) == "1"
    last = raw[1] if raw[1] not in ("", b"") else None
    infos = [_group_info(raw, i) for i in range(2, len(raw), _GROUP_FIELDS)]
    return ended, last, infos


#: Strings per key in the key_infos script's reply (after its first, the script's now).
_KEY_FIELDS = 8


def decode_key_infos(raw: Sequence[Any]) -> list[KeyInfo]:
    """Turn the key_infos script's reply (now, then 8 strings per key) into KeyInfo objects."""
    now = float(text(raw[0]))
    out: list[KeyInfo] = []
    for i in range(1, len(raw), _KEY_FIELDS):
        policy = decode_policy(raw[i + 2]) or KeyPolicy()
        oldest = _optional_float(raw[i + 6])
        tokens = _optional_float(raw[i + 7])
        out.append(
            KeyInfo(
                key=text(raw[i]),
                policy=policy,
                own_policy=text(raw[i + 1]) == "1",
                in_flight=int(text(raw[i + 3])),
                groups=int(text(raw[i + 4])),
                messages=int(text(raw[i + 5])),
                oldest_age_s=None if oldest is None else max(0.0, now - oldest),
                tokens=tokens,
                next_token_at=None if tokens is None else next_token_at(policy, tokens, now),
            )
        )
    return out


def decode_workers(raw: Sequence[Any], queue: str) -> list[WorkerInfo]:
    """Turn the workers script's flat reply (now, then per worker ten strings, its count of
    leases and four strings per lease) into WorkerInfo, by id in code point order."""
    now = float(text(raw[0]))
    rows: list[tuple[Any, ...]] = []
    i = 1
    while i < len(raw):
        fields = [text(value) for value in raw[i : i + 10]]
        worker_id, holder, host, pid, version, conc, every, slots, start, last = fields
        count = int(text(raw[i + 10]))
        i += 11
        head = (worker_id, holder, host, pid, version, conc, every, slots, start, last, now)
        if count == 0:
            rows.append((*head, None, None, None, None))
        for _ in range(count):
            group_id, message_id, lease_holder, expires = (text(v) for v in raw[i : i + 4])
            rows.append((*head, group_id, message_id, lease_holder, expires))
            i += 4
    rows.sort(key=lambda row: row[0])
    return worker_infos_of_rows(rows, queue)
