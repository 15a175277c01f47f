"""Script replies into pgque's models. A flat reply holds a fixed number of strings per record;
:func:`_records` cuts it and converts each field. Stored text that does not decode is shown,
never fatal (:mod:`pgque.core.stored`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    Undecodable,
    claimed_leases,
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

#: A field's conversion from the string Redis sent (None: kept as sent).
_Field = Callable[[Any], Any] | None


def _records(raw: Sequence[Any], fields: Sequence[_Field], start: int = 0) -> list[tuple[Any, ...]]:
    """Cut the flat *raw* from *start* into records of ``len(fields)`` strings, each converted."""
    width = len(fields)
    return [
        tuple(v if f is None else f(v) for f, v in zip(fields, raw[i : i + width], strict=True))
        for i in range(start, len(raw), width)
    ]


def _int(value: object) -> int:
    return int(text(value))


def _float(value: object) -> float:
    return float(text(value))


def _optional_float(value: object) -> float | None:
    shown = text(value)
    return float(shown) if shown else None


def _int_or_zero(value: object) -> int:
    try:
        return int(text(value))
    except ValueError:
        return 0  # ids start at 1: 0 says the stored id was no message id


def _or_none(value: object) -> Any:
    return value or None


def decode_leases(
    raw: Sequence[Any], queue: str, origin: str
) -> tuple[list[Lease], list[Undecodable]]:
    """Turn the claim script's reply (7 strings per lease) into leases, and apart the heads
    whose message id or event does not decode, for the caller to dead-letter."""
    return claimed_leases(_records(raw, [None] * 7), queue, origin)


#: A dead letter's fields in the dead_letters script's reply; a stored message id that is no
#: integer shows as 0, text that is not UTF-8 its bad bytes escaped (``\\xff``).
_DEAD_LETTER = (_int, readable, _int_or_zero, None, _int, _int, readable, _float, _or_none)


def decode_dead_letters(raw: Sequence[Any]) -> list[DeadLetter]:
    """Turn the dead_letters script's reply into DeadLetter objects."""
    return [dead_letter(row) for row in _records(raw, _DEAD_LETTER)]


def decode_stats(raw: Sequence[Any]) -> QueueStats:
    """Turn the stats script's reply into QueueStats (its 9th string: the script's now, which
    makes the oldest message's enqueue time an age)."""
    items = [text(v) for v in raw]
    counts = [int(item) for item in items[:6]]
    now = float(items[8])
    oldest = None if not items[6] else max(0.0, now - float(items[6]))
    resume, due = (float(item) if item else None for item in (items[7], items[11]))
    return queue_stats((*counts, oldest, resume, int(items[9]), int(items[10]), due))


def decode_scheduled(raw: Sequence[Any]) -> list[ScheduledMessage]:
    """Turn the scheduled script's reply into ScheduledMessage objects."""
    fields = (_int, readable, _float, None, _int, _float)
    return [scheduled_message(row) for row in _records(raw, fields)]


#: How long past its due time an idle wait for a scheduled message lasts (seconds), so that the
#: message is due when the waiter claims; also the shortest such wait (DueWait's floor).
DUE_MARGIN = 0.001


def due_in(reply: Sequence[Any]) -> float | None:
    """Return the seconds until the next scheduled message is due and :data:`DUE_MARGIN`
    past it, from the next_due script's *reply*; None when nothing is scheduled."""
    due = text(reply[0])
    return float(due) - float(text(reply[1])) + DUE_MARGIN if due else None


_STATES: dict[str, GroupStateName] = {state: state for state in GROUP_STATES}


def _head(value: object) -> int | None:
    return None if value in ("", b"") else _int_or_zero(value)


def _readable_or_none(value: object) -> str | None:
    return readable(value) or None


#: A group's fields in the group, groups and oldest_groups scripts' replies.
_GROUP = (
    readable,
    lambda state: _STATES[text(state)],
    _int,
    _int,
    _head,
    _optional_float,
    _int,
    _optional_float,
    _readable_or_none,
    _optional_float,
    _or_none,
    readable,
)


def decode_group(raw: Sequence[Any]) -> GroupInfo | None:
    """Turn the group script's reply (one group, or none) into a GroupInfo or None."""
    return group_info(_records(raw, _GROUP)[0]) if raw else None


def decode_groups_page(raw: Sequence[Any]) -> tuple[bool, bytes | str | None, list[GroupInfo]]:
    """Turn one groups script reply into (index ended, last id examined or None, groups)."""
    ended = text(raw[0]) == "1"
    last = raw[1] if raw[1] not in ("", b"") else None
    return ended, last, [group_info(row) for row in _records(raw, _GROUP, 2)]


def decode_key_infos(raw: Sequence[Any]) -> list[KeyInfo]:
    """Turn the key_infos script's reply (now, then 8 strings per key) into KeyInfo objects."""
    now = float(text(raw[0]))
    out: list[KeyInfo] = []
    fields = (text, text, None, _int, _int, _int, _optional_float, _optional_float)
    for key, own, policy_text, in_flight, groups, messages, oldest, tokens in _records(
        raw, fields, 1
    ):
        policy = decode_policy(policy_text) or KeyPolicy()
        out.append(
            KeyInfo(
                key=key,
                policy=policy,
                own_policy=own == "1",
                in_flight=in_flight,
                groups=groups,
                messages=messages,
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
