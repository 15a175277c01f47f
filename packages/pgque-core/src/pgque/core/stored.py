"""Records a store keeps as text (events, errors), read back and written the same way by every
backend that stores text (PostgreSQL, Redis).

Stored text that does not decode (written by hand, damaged, or by a newer version) never fails
a read: a dead letter or a scheduled message whose event is not Event JSON shows a stand-in
event of kind :data:`UNDECODABLE_KIND`, whose data holds the text (its first
:data:`SHOWN_CHARS` characters) under ``"text"`` and the decoding error under ``"error"``; a
stored error that is not an ErrorInfo shows an ErrorInfo of that type quoting the text. A head
a claim cannot decode is dead-lettered through its own lease with the reason
:func:`undecodable_reason` gives. Bytes that are not UTF-8 are shown escaped (``\\xff``).

A settlement's error is stored as :func:`error_json` says: ``ErrorInfo.to_json()``, its
``at`` left null for the store to fill in with its own clock when the settlement says so
(``CheckedSettlement.store_clock``); :func:`error_json_head` is the same JSON cut before its
time, for a store that writes the time itself (Redis's scripts).

A store's records come back as fields in one order, the same on every store (:data:`GROUP_FIELDS`
and the rest): :func:`claimed_lease`, :func:`group_info`, :func:`dead_letter`,
:func:`key_policy`, :func:`key_info`, :func:`scheduled_message` and :func:`queue_stats` build
the models from them, the stored texts decoded as above. A store that keeps a key's policy as
one text writes it as :func:`encode_policy` says and reads it with :func:`decode_policy`.

Pure functions: no I/O, shared by the blocking and asyncio drivers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pgque.core.errors import PgqueError
from pgque.core.models import (
    DeadLetter,
    ErrorInfo,
    Event,
    GroupInfo,
    HistoryRecord,
    KeyInfo,
    KeyPolicy,
    Lease,
    QueueStats,
    ScheduledMessage,
)
from pgque.core.validation import MAX_REASON_CHARS

__all__ = [
    "UNDECODABLE_KIND",
    "UNDECODABLE_REASON",
    "SHOWN_CHARS",
    "readable",
    "decode_event",
    "stand_in_event",
    "decode_error",
    "stand_in_error",
    "undecodable_reason",
    "error_json",
    "error_json_head",
    "reply_text",
    "claimed_lease",
    "Undecodable",
    "claimed_leases",
    "GROUP_FIELDS",
    "group_info",
    "dead_letter",
    "key_policy",
    "key_info",
    "encode_policy",
    "decode_policy",
    "scheduled_message",
    "history_record",
    "STATS_FIELDS",
    "queue_stats",
]

#: The kind of the stand-in event shown for a stored event that is not Event JSON, and the
#: type of the stand-in ErrorInfo shown for a stored error that is not an ErrorInfo.
UNDECODABLE_KIND = "pgque.undecodable"
#: How the reason of a head dead-lettered because its event does not decode starts.
UNDECODABLE_REASON = "undecodable event"
#: How much of an undecodable event's text its stand-in event carries (characters).
SHOWN_CHARS = 4096


def readable(raw: object) -> str:
    """Return a stored value as text: bytes decoded as UTF-8 with the bytes that are not UTF-8
    escaped (``\\xff``), a str as it is, anything else (a number in a reply) through ``str``."""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="backslashreplace")
    return raw if isinstance(raw, str) else str(raw)


def stand_in_event(raw: object, error: BaseException | str) -> Event:
    """Return the event shown for stored text *raw* that is not Event JSON: kind
    :data:`UNDECODABLE_KIND`, data ``{"text": <raw, cut>, "error": <why, cut>}``."""
    return Event(
        kind=UNDECODABLE_KIND,
        data={"text": readable(raw)[:SHOWN_CHARS], "error": str(error)[:MAX_REASON_CHARS]},
    )


def decode_event(raw: str | bytes) -> Event:
    """Return the stored event *raw*; text that is not Event JSON as :func:`stand_in_event`."""
    try:
        return Event.from_json(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    # Any failure, not only InvalidInput: json raises RecursionError on deeply nested text.
    except Exception as exc:
        return stand_in_event(raw, exc)


def stand_in_error(raw: object) -> ErrorInfo:
    """Return the ErrorInfo shown for a stored error *raw* that is not one: type
    :data:`UNDECODABLE_KIND`, the text as its message (bounded as ErrorInfo is), ``at`` 0."""
    return ErrorInfo(type=UNDECODABLE_KIND, message=readable(raw), at=0.0).bounded()


def decode_error(raw: str | bytes | None) -> ErrorInfo | None:
    """Return the stored error *raw* (None for none); text that is not an ErrorInfo as
    :func:`stand_in_error`."""
    if raw is None:
        return None
    try:
        return ErrorInfo.from_json(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except Exception:  # InvalidInput, and RecursionError on deeply nested text
        return stand_in_error(raw)


def undecodable_reason(error: BaseException) -> str:
    """Return the dead-letter reason of a head whose stored event did not decode (*error*):
    ``undecodable event: <type>: <message>``, on one line, without NUL, at most
    ``MAX_REASON_CHARS`` characters."""
    detail = " ".join(str(error).replace("\x00", "").split())
    return f"{UNDECODABLE_REASON}: {type(error).__name__}: {detail}"[:MAX_REASON_CHARS]


#: How a record's JSON ends when its time is 0.0: its time, which :func:`error_json_head` cuts.
_ZERO_TIME = "0.0}"


def error_json_head(info: ErrorInfo) -> str:
    """Return *info*'s stored JSON up to its time, ending with ``"at":``: the time and the
    closing brace are the store's to append (its own clock's time, or the record's)."""
    whole = info.model_copy(update={"at": 0.0}).to_json()
    if not whole.endswith('"at":' + _ZERO_TIME):  # pragma: no cover - ErrorInfo.to_json changed
        raise PgqueError("ErrorInfo.to_json no longer ends with its time")
    return whole[: -len(_ZERO_TIME)]


def error_json(info: ErrorInfo, store_clock: bool = False) -> str:
    """Return *info* as the JSON a store keeps, ``ErrorInfo.to_json()``; with *store_clock*
    (``CheckedSettlement.store_clock``: no injected clock, and the error was not given whole)
    its ``at`` is null, for the store to fill in with its own clock's time."""
    at = "null" if store_clock else json.dumps(info.at)
    return f"{error_json_head(info)}{at}}}"


def reply_text(value: object) -> str:
    """Return a field of a store's reply as str: bytes decoded as UTF-8 (strictly: raises
    UnicodeDecodeError), a str as it is, anything else through ``str``."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value if isinstance(value, str) else str(value)


def _int(value: object) -> int:
    return value if isinstance(value, int) else int(reply_text(value))


def claimed_lease(fields: Sequence[Any], queue: str, origin: str) -> Lease | str:
    """Return the lease of a claimed head, whose *fields* are (group id, message id, event
    text, token, priority, attempt, expiry); or, when a field does not decode (text written by
    hand or damaged), the reason to dead-letter the head with (:func:`undecodable_reason`)."""
    group_id, message_id, text, token, priority, attempt, expires_at = fields
    try:
        # Lease(...) with an Event instance is cheaper than Lease.model_construct here
        # (pydantic does not validate the instance again); measured in docs/postgres.md.
        return Lease(
            group_id=reply_text(group_id),
            message_id=_int(message_id),
            event=Event.from_json(reply_text(text)),
            token=reply_text(token),
            priority=int(priority),
            attempt=int(attempt),
            expires_at=float(expires_at),
            queue=queue,
            origin=origin,
        )
    # Any failure, not only ValueError (InvalidInput, UnicodeDecodeError): json raises
    # RecursionError on deeply nested text, and one bad head must not fail the others.
    except Exception as exc:
        return undecodable_reason(exc)


@dataclass(frozen=True)
class Undecodable:
    """A claimed head whose stored fields did not decode: its lease's fields as the store sent
    them (to hand back to its dead-letter call unchanged) and the reason to dead-letter it with.
    """

    group_id: Any
    message_id: Any
    token: Any
    reason: str


def claimed_leases(
    rows: Iterable[Sequence[Any]], queue: str, origin: str
) -> tuple[list[Lease], list[Undecodable]]:
    """Return the leases of a claim's *rows* (:func:`claimed_lease`'s fields), in row order,
    and apart the heads that did not decode, for the caller to dead-letter through their own
    leases."""
    leases: list[Lease] = []
    bad: list[Undecodable] = []
    for row in rows:
        lease = claimed_lease(row, queue, origin)
        if isinstance(lease, str):
            bad.append(Undecodable(row[0], row[1], row[3], lease))
        else:
            leases.append(lease)
    return leases, bad


#: The fields of a group's record up to its last error, as GroupInfo names them.
GROUP_FIELDS = (
    "group_id",
    "state",
    "depth",
    "priority",
    "head_message_id",
    "head_enqueued_at",
    "head_attempts",
    "lease_expires_at",
    "lease_holder",
    "resume_at",
)


def group_info(fields: Sequence[Any]) -> GroupInfo:
    """Return the GroupInfo of a group's record: :data:`GROUP_FIELDS`, then its last error as
    stored (:func:`decode_error`) and its fairness key (``""``: the default key)."""
    return GroupInfo(
        **dict(zip(GROUP_FIELDS, fields[:10], strict=True)),
        last_error=decode_error(fields[10]),
        fairness_key=fields[11] or None,
    )


def dead_letter(fields: Sequence[Any]) -> DeadLetter:
    """Return the DeadLetter of (id, group id, message id, stored event, priority, attempts,
    reason, failed at, stored error); the stored texts decoded (:func:`decode_event`,
    :func:`decode_error`)."""
    id_, group_id, message_id, event, priority, attempts, reason, failed_at, error = fields
    return DeadLetter(
        id=id_,
        group_id=group_id,
        message_id=message_id,
        event=decode_event(event),
        priority=priority,
        attempts=attempts,
        reason=reason,
        failed_at=failed_at,
        error=decode_error(error),
    )


def key_policy(fields: Sequence[Any]) -> KeyPolicy:
    """Return the KeyPolicy of (weight, max_in_flight, rate, per, burst)."""
    weight, max_in_flight, rate, per, burst = fields
    return KeyPolicy(weight=weight, max_in_flight=max_in_flight, rate=rate, per=per, burst=burst)


def key_info(fields: Sequence[Any]) -> KeyInfo:
    """Return the KeyInfo of (key, own policy, the policy's 5 fields (:func:`key_policy`),
    in flight, groups, messages, oldest age, tokens, next token at)."""
    key, own, *policy = fields[:7]
    in_flight, groups, messages, oldest_age_s, tokens, next_token_at = fields[7:]
    return KeyInfo(
        key=key,
        policy=key_policy(policy),
        own_policy=own,
        in_flight=in_flight,
        groups=groups,
        messages=messages,
        oldest_age_s=oldest_age_s,
        tokens=tokens,
        next_token_at=next_token_at,
    )


def encode_policy(policy: KeyPolicy) -> str:
    """Return *policy* as one text: ``<weight> <cap> <rate> <per> <burst>``, ``-`` for none
    (repr keeps every float exact)."""

    def shown(value: float | int | None) -> str:
        return "-" if value is None else repr(value)

    return " ".join(
        [
            repr(policy.weight),
            shown(policy.max_in_flight),
            shown(policy.rate),
            repr(policy.per),
            shown(policy.burst),
        ]
    )


def decode_policy(value: object) -> KeyPolicy | None:
    """Return the KeyPolicy of a text :func:`encode_policy` wrote (``""`` or None: none)."""
    if value is None or value in ("", b""):
        return None
    weight, cap, rate, per, burst = reply_text(value).split(" ")
    return KeyPolicy(
        weight=float(weight),
        max_in_flight=None if cap == "-" else int(cap),
        rate=None if rate == "-" else float(rate),
        per=float(per),
        burst=None if burst == "-" else int(burst),
    )


def scheduled_message(fields: Sequence[Any]) -> ScheduledMessage:
    """Return the ScheduledMessage of (id, group id, due at, stored event, priority, enqueued
    at); a stored event that does not decode shows the kind :data:`UNDECODABLE_KIND`."""
    message_id, group_id, due_at, event, priority, enqueued_at = fields
    return ScheduledMessage(
        id=message_id,
        group_id=group_id,
        due_at=due_at,
        kind=decode_event(event).kind,
        priority=priority,
        enqueued_at=enqueued_at,
    )


def history_record(fields: Sequence[Any]) -> HistoryRecord:
    """Return the HistoryRecord of (id, message id, group id, kind, fairness key, outcome,
    attempt, published at, started at, finished at, worker, stored error, reason); an empty
    fairness key is the default key (None), a stored error is read by :func:`decode_error`."""
    (id_, message_id, group_id, kind, fkey, outcome, attempt, published_at, started_at,
     finished_at, worker, error, reason) = fields  # fmt: skip
    return HistoryRecord(
        id=id_,
        message_id=message_id,
        group_id=group_id,
        kind=kind,
        fairness_key=fkey or None,
        outcome=outcome,
        attempt=attempt,
        published_at=published_at,
        started_at=started_at,
        finished_at=finished_at,
        worker=worker,
        error=decode_error(error),
        reason=reason,
    )


#: The fields of a queue's statistics, as QueueStats names them.
STATS_FIELDS = (
    "groups",
    "messages",
    "in_flight",
    "parked",
    "blocked",
    "dead_letters",
    "oldest_age_s",
    "next_resume_at",
    "paused",
    "scheduled",
    "next_due_at",
)


def queue_stats(fields: Sequence[Any]) -> QueueStats:
    """Return the QueueStats of :data:`STATS_FIELDS`."""
    return QueueStats(**dict(zip(STATS_FIELDS, fields, strict=True)))
