"""Browse and search, the pure part: what ``messages()`` and ``message()`` return, a query's
checks, the payload preview and the paging rules every backend follows.

No I/O. A transport with ``Capabilities.browse`` lists the messages of a queue behind their
groups' heads (docs/reference.md, "Browse and search"):

- ``messages(group_id=G)``: G's messages in the group's order, head first, ``limit`` at a
  time (an index range on every backend);
- ``messages(kind=K)`` (queue-wide, or with ``group_id`` in one group): the messages whose
  event kind is K; a filtered scan that examines at most :data:`SCAN_ROWS` messages per call,
  so a call is bounded however rare the kind is;
- ``messages()`` with neither: every message of the queue in id order, at most
  :data:`SCAN_ROWS` examined per call as well;
- ``message(id)``: one message, pending, in flight or scheduled;
- ``scheduled(group_id=G)``: G's scheduled messages (not due yet), in id order.

Each item carries a preview of the event's ``data``: its JSON text as stored (compact, what
``Event.to_json`` writes), cut to :data:`PREVIEW_CHARS` characters, and ``truncated`` when it
was longer; ``size`` is the byte length of the stored event JSON. A page never carries a
whole payload, so a page of huge events stays small.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from pgque.core.errors import InvalidInput
from pgque.core.models import compact_json
from pgque.core.validation import MAX_GROUP_ID_BYTES, check_text_id

__all__ = [
    "MAX_MESSAGES_PAGE",
    "PREVIEW_CHARS",
    "SCAN_ROWS",
    "UNDECODABLE_KIND",
    "MessageInfo",
    "MessagePage",
    "MessagesQuery",
    "check_group_prefix",
    "check_messages_query",
    "data_preview",
    "message_info",
    "message_row",
    "message_rows_page",
    "page_of",
    "prefix_end",
]

#: The largest page of ``messages()``.
MAX_MESSAGES_PAGE = 1000
#: How many characters of the data's JSON text a preview keeps.
PREVIEW_CHARS = 200
#: How many messages one ``messages()`` call examines at most when it filters (by kind) or
#: lists the whole queue; ``next_after`` goes on where the call stopped.
SCAN_ROWS = 10_000
#: The kind shown for a stored event that is not Event JSON (as ``scheduled()`` shows it).
UNDECODABLE_KIND = "pgque.undecodable"
#: The longest event kind a filter may name (``Event.kind``'s limit).
_MAX_KIND_CHARS = 256


class MessageInfo(BaseModel):
    """One message as an operator sees it (``messages()`` / ``message()``).

    ``due_at`` is set for a scheduled message (not in its group yet; it joins the tail then),
    None for one in its group. ``is_head``: the group's first message, the one a claim
    delivers (or has delivered: an in-flight message is its group's head). ``attempts``: its
    deliveries so far. ``size``: bytes of the stored event JSON. ``preview``: the first
    :data:`PREVIEW_CHARS` characters of the event's ``data`` JSON text; ``truncated`` when
    there was more.
    """

    model_config = ConfigDict(frozen=True)

    message_id: int
    group_id: str
    kind: str
    event_id: str
    enqueued_at: float
    due_at: float | None = None
    is_head: bool
    attempts: int = 0
    size: int
    preview: str
    truncated: bool


class MessagePage(BaseModel):
    """A page of ``messages()``: its *items*, and *next_after*, the cursor to pass as
    ``after`` for the next page (None: nothing is left). A page may hold fewer than ``limit``
    items, even none, and still have a ``next_after``: a filtered scan stopped after
    examining :data:`SCAN_ROWS` messages."""

    model_config = ConfigDict(frozen=True)

    items: list[MessageInfo]
    next_after: int | None = None


@dataclass(frozen=True, slots=True)
class MessagesQuery:
    """What ``messages()`` asks for, checked: a group or None, a kind or None, a page size
    (1-1,000) and a cursor (a ``next_after``) or None."""

    group_id: str | None
    kind: str | None
    limit: int
    after: int | None


def check_group_prefix(prefix: object) -> str | None:
    """Return *prefix* (``groups(prefix=)``): None, or a str usable as the start of a group
    id; the empty prefix is None (every group). Raises InvalidInput otherwise."""
    if prefix is None:
        return None
    checked = check_text_id(prefix, "prefix", MAX_GROUP_ID_BYTES, empty_ok=True)
    return checked or None


def check_messages_query(
    *, group_id: object, kind: object, limit: object, after: object
) -> MessagesQuery:
    """Check the arguments of ``messages()``; raises InvalidInput for a bad one."""
    group = None if group_id is None else check_text_id(group_id, "group_id", MAX_GROUP_ID_BYTES)
    if kind is not None and (
        not isinstance(kind, str) or not kind or len(kind) > _MAX_KIND_CHARS or "\x00" in kind
    ):
        raise InvalidInput(
            f"kind must be a non-empty str of at most {_MAX_KIND_CHARS} characters, not {kind!r}"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_MESSAGES_PAGE:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_MESSAGES_PAGE}, not {limit!r}")
    if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
        raise InvalidInput(f"after must be an int (a page's next_after) or None, not {after!r}")
    return MessagesQuery(group, kind, limit, after)


def prefix_end(prefix: str) -> str | None:
    """The least text above every text that starts with *prefix*, in code point order (UTF-8
    byte order), or None when no text is above them all. ``prefix <= id < prefix_end`` is the
    range of the ids that start with *prefix*."""
    chars = list(prefix)
    while chars:
        code = ord(chars.pop())
        if code < 0x10FFFF:
            code += 1
            if 0xD800 <= code <= 0xDFFF:  # no text holds a surrogate: skip them
                code = 0xE000
            return "".join(chars) + chr(code)
    return None


def data_preview(event_json: str) -> tuple[str, str, str, bool]:
    """``(event id, kind, preview, truncated)`` of a stored event's JSON text: the preview is
    the data's JSON text as ``Event.to_json`` writes it, cut to :data:`PREVIEW_CHARS`."""
    try:
        raw: Any = json.loads(event_json)
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        # Not Event JSON (a foreign publish): shown whole, as scheduled() shows its kind.
        return "", UNDECODABLE_KIND, event_json[:PREVIEW_CHARS], len(event_json) > PREVIEW_CHARS
    data = compact_json(raw.get("data"))  # as Event.to_json writes it
    return (
        str(raw.get("id", "")),
        str(raw.get("kind", "")),
        data[:PREVIEW_CHARS],
        len(data) > PREVIEW_CHARS,
    )


def message_info(
    *,
    message_id: int,
    group_id: str,
    event_json: str,
    enqueued_at: float,
    is_head: bool,
    attempts: int = 0,
    due_at: float | None = None,
) -> MessageInfo:
    """A :class:`MessageInfo` built from a stored event's whole JSON text (the in-memory
    store; a server-side backend sends the preview it cut instead)."""
    event_id, kind, preview, truncated = data_preview(event_json)
    return MessageInfo(
        message_id=message_id,
        group_id=group_id,
        kind=kind,
        event_id=event_id,
        enqueued_at=enqueued_at,
        due_at=due_at,
        is_head=is_head,
        attempts=attempts,
        size=len(event_json.encode("utf-8")),
        preview=preview,
        truncated=truncated,
    )


_T = TypeVar("_T")


def page_of(
    rows: Iterable[tuple[int, _T]],
    matches: Callable[[_T], bool],
    limit: int,
    budget: int = SCAN_ROWS,
) -> tuple[list[_T], int | None]:
    """The paging rule of ``messages()`` over *rows*, ``(cursor, row)`` in cursor order after
    the caller's ``after``: keep the rows that *match*, up to *limit*, examining at most
    *budget* rows. Returns the kept rows and ``next_after``: None once *rows* ran out, else
    the cursor of the last row examined (the last kept one when the page filled)."""
    kept: list[_T] = []
    last: int | None = None
    for examined, (cursor, row) in enumerate(rows):
        if len(kept) >= limit or examined >= budget:
            return kept, last
        last = cursor
        if matches(row):
            kept.append(row)
    return kept, None


def message_row(fields: Sequence[Any]) -> MessageInfo:
    """The MessageInfo of a server-side row: (message id, group id, event id, kind, enqueued
    at, due at, is head, attempts, size, preview, truncated); NULL texts read as ``""``."""
    (
        message_id,
        group_id,
        event_id,
        kind,
        enqueued_at,
        due_at,
        is_head,
        attempts,
        size,
        preview,
        truncated,
    ) = fields
    return MessageInfo(
        message_id=int(message_id),
        group_id=str(group_id),
        kind=UNDECODABLE_KIND if kind is None else str(kind),
        event_id="" if event_id is None else str(event_id),
        enqueued_at=float(enqueued_at),
        due_at=None if due_at is None else float(due_at),
        is_head=bool(is_head),
        attempts=int(attempts),
        size=int(size),
        preview="" if preview is None else str(preview),
        truncated=bool(truncated),
    )


def message_rows_page(rows: Sequence[Sequence[Any]]) -> MessagePage:
    """The MessagePage of a listing's rows: (message id, group id, event id, kind, enqueued at,
    is head, attempts, size, preview, truncated, cursor), the last one with no message id
    when it only carries ``next_after`` (its cursor)."""
    items: list[MessageInfo] = []
    next_after: int | None = None
    for row in rows:
        if row[0] is None:
            next_after = int(row[10])
            continue
        items.append(message_row([*row[:5], None, *row[5:10]]))
    return MessagePage(items=items, next_after=next_after)
