"""Checks of what names things: queue names, group ids and other text ids, message ids,
holders, group states, and the arguments of the paged listings."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pgque.core.errors import InvalidInput
from pgque.core.models import GROUP_STATES, GroupStateName
from pgque.core.validation._limits import (
    MAX_BATCH,
    MAX_ENTRY_NAME_BYTES,
    MAX_GROUP_ID_BYTES,
    MAX_GROUPS_PAGE,
    MAX_HOLDER_CHARS,
)

__all__ = [
    "QUEUE_NAME_PATTERN",
    "check_queue_name",
    "check_text_id",
    "check_group_id",
    "check_entry_name",
    "check_message_id",
    "check_head",
    "check_ids",
    "check_after_id",
    "check_holder",
    "check_holders",
    "check_group_state",
    "check_limit",
    "check_scheduled_page",
    "check_groups_page",
    "check_oldest_groups",
]

#: The queue name grammar: what users name queues (``orders-v2``, ``Billing.EU``), nothing that
#: needs quoting in a Redis key or hash tag (no ``{``, ``}``, ``:``, space) and nothing a shell
#: or a URL query would mangle. Names reach SQL only as parameters, never as identifiers.
QUEUE_NAME_PATTERN = r"[A-Za-z][A-Za-z0-9_.\-]{0,63}"
_QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)


def check_queue_name(name: object) -> str:
    """Return *name* if it is a valid queue name: ``[A-Za-z][A-Za-z0-9_.-]{0,63}``.

    Raises InvalidInput for anything else (before any I/O).
    """
    if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name):
        raise InvalidInput(
            f"invalid queue name {name!r}: use 1-64 characters of letters, digits, "
            "_, - and ., starting with a letter"
        )
    return name


def check_text_id(
    value: object, name: str, max_bytes: int, *, empty_ok: bool = False, expected: str = "a str"
) -> str:
    """Return *value* if it is a str usable as an identifier: a group id, a key, a dedup key.

    It must be valid Unicode (no lone surrogates) without NUL, of at most *max_bytes* UTF-8
    bytes, and not empty unless *empty_ok*. *name* and *expected* word the error. Raises
    InvalidInput otherwise.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be {expected}, not {type(value).__name__}")
    if not value and not empty_ok:
        raise InvalidInput(f"{name} must not be empty")
    if "\x00" in value:
        raise InvalidInput(f"{name} must not contain NUL")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{name} must be valid Unicode (no lone surrogates)") from exc
    if size > max_bytes:
        raise InvalidInput(f"{name} is {size} bytes; the limit is {max_bytes}")
    return value


def check_group_id(group_id: object) -> str:
    """Return *group_id* if it is a str of at most 512 UTF-8 bytes without NUL, not blank.

    Blank means empty or white space alone (``" "``, a tab, U+3000): such an id reads as no
    group at all in every listing. Raises InvalidInput otherwise.
    """
    checked = check_text_id(group_id, "group_id", MAX_GROUP_ID_BYTES)
    if not checked.strip():
        raise InvalidInput(f"group_id must not be blank (white space alone), not {checked!r}")
    return checked


def check_entry_name(entry: object) -> str:
    """Return a schedule entry's name: a non-empty str of at most 200 UTF-8 bytes, no NUL."""
    return check_text_id(entry, "entry", MAX_ENTRY_NAME_BYTES)


def check_message_id(message_id: object) -> int:
    """Return *message_id* if it is a positive int (``cancel``); bool is refused."""
    if isinstance(message_id, bool) or not isinstance(message_id, int) or message_id < 1:
        raise InvalidInput(f"message_id must be a positive int, not {message_id!r}")
    return message_id


def check_head(head: object) -> int | None:
    """Return *head* (``unblock(head=)``): None, or the positive int id of a message."""
    if head is None:
        return None
    if isinstance(head, bool) or not isinstance(head, int) or head < 1:
        raise InvalidInput(f"head must be a message id (a positive int) or None, not {head!r}")
    return head


def check_ids(ids: object) -> list[int] | None:
    """Return *ids* as a list of ints, or None for "all"."""
    if ids is None:
        return None
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InvalidInput("ids must be a sequence of ints or None")
    out: list[int] = []
    for item in ids:
        if isinstance(item, bool) or not isinstance(item, int):
            raise InvalidInput(f"ids must be ints, not {item!r}")
        out.append(item)
    return out


def check_after_id(after: object) -> int | None:
    """Return *after* if it is None or an int (a dead letter id to list after)."""
    if after is None:
        return None
    if isinstance(after, bool) or not isinstance(after, int):
        raise InvalidInput(f"after must be an int or None, not {after!r}")
    return after


def check_holder(holder: object) -> str | None:
    """Return *holder* if it is None or a str of at most 200 characters without NUL."""
    if holder is None:
        return None
    if not isinstance(holder, str):
        raise InvalidInput(f"holder must be a str or None, not {type(holder).__name__}")
    if len(holder) > MAX_HOLDER_CHARS:
        raise InvalidInput(f"holder must be at most {MAX_HOLDER_CHARS} characters")
    return check_text_id(holder, "holder", 4 * MAX_HOLDER_CHARS, empty_ok=True) or None


def check_holders(holder: object, n: int) -> list[str | None]:
    """Return one checked holder per lease of a claim of *n*: *holder* repeated when it is a
    str or None, else *holder* itself, a list or tuple of exactly *n* holders."""
    if holder is None or isinstance(holder, str):
        return [check_holder(holder)] * n
    if not isinstance(holder, (list, tuple)):
        raise InvalidInput(
            f"holder must be a str, None or a list of one per lease, not {type(holder).__name__}"
        )
    if len(holder) != n:
        raise InvalidInput(
            f"a list of holders needs one per lease asked for ({n}), not {len(holder)}"
        )
    return [check_holder(item) for item in holder]


def check_group_state(state: object) -> GroupStateName | None:
    """Return *state* if it is None or one of ``ready leased parked blocked paused``."""
    if state is None:
        return None
    for name in GROUP_STATES:
        if state == name:
            return name
    raise InvalidInput(f"state must be one of {', '.join(GROUP_STATES)} or None, not {state!r}")


def check_limit(limit: object) -> int:
    """Return *limit* if it is an int from 1 to 10,000."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_BATCH}, not {limit!r}")
    return limit


def check_scheduled_page(limit: object, after: object) -> tuple[int, int | None]:
    """Check the arguments of ``scheduled()``: a limit from 1 to 1,000 (as ``groups()``'s
    page) and None or a message id (an int) to list after."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUPS_PAGE:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_GROUPS_PAGE}, not {limit!r}")
    return limit, check_after_id(after)


def check_groups_page(
    state: object, limit: object, after: object
) -> tuple[GroupStateName | None, int, str | None]:
    """Check the arguments of ``groups()``: a state or None, a limit from 1 to 1,000, and
    a group id or None to start after."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_GROUPS_PAGE:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_GROUPS_PAGE}, not {limit!r}")
    start = None if after is None else check_text_id(after, "after", MAX_GROUP_ID_BYTES)
    return check_group_state(state), limit, start


def check_oldest_groups(state: object, limit: object) -> tuple[GroupStateName | None, int]:
    """Check the arguments of ``oldest_groups()``: a state or None, a limit from 1 to 1,000."""
    chosen, size, _ = check_groups_page(state, limit, None)
    return chosen, size
