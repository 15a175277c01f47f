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

Pure functions: no I/O, shared by the blocking and asyncio drivers.
"""

from __future__ import annotations

import json

from pgque.core.errors import PgqueError
from pgque.core.models import ErrorInfo, Event
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
