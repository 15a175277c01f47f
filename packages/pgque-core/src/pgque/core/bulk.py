"""Bulk actions, the pure part: what a bulk call selects, its checks and its result.

No I/O. The front door (:class:`~pgque.core.Client` / :class:`~pgque.core.AsyncClient`)
writes the bulk actions once over the driver's single-item primitives:

- on groups, ``bulk_pause``, ``bulk_resume`` and ``bulk_retry_now`` select groups by a list of
  ids (``group_ids``) and/or a filter (``state``, ``key`` — the fairness key, ``""`` for the
  groups published without one — and ``prefix`` of the group id), then apply the single
  command (``pause``, ``resume``, ``retry_now``) to each one selected;
- on dead letters, ``bulk_redrive`` and ``bulk_delete_dead_letters`` select dead letters by a
  list of ids and/or a filter (``prefix`` of their group id, event ``kind``), then redrive or
  delete those.

Every call is bounded: it acts on at most ``limit`` items (at most :data:`MAX_BULK`, the
default), and when a filter is checked item by item (a fairness key; any dead-letter filter)
it examines at most :data:`SCAN_ITEMS` items; :attr:`BulkResult.next_after` tells where the
next call goes on. A call with no selection and no filter is refused (InvalidInput), never
read as "everything": ``prefix=""`` says "every group" explicitly. ``dry_run=True`` selects
without acting (a preview: how many match, and which).

The selection is read when the call runs, not before: a group given by id that no longer
matches the filter is left alone. Between that read and its command a group may still move;
each command then acts as its single form would (``retry_now`` of a group no longer waiting
changes nothing and is not counted in :attr:`BulkResult.changed`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from pgque.core.errors import InvalidInput
from pgque.core.fairness import DEFAULT_KEY, check_policy_key
from pgque.core.models import DeadLetter, GroupInfo, GroupStateName
from pgque.core.validation import (
    MAX_GROUP_ID_BYTES,
    check_group_id,
    check_group_state,
    check_text_id,
)

__all__ = [
    "MAX_BULK",
    "SCAN_ITEMS",
    "BulkGroupAction",
    "BulkDeadLetterAction",
    "BulkResult",
    "DeadLetterSelection",
    "GroupSelection",
    "check_dead_letter_selection",
    "check_group_selection",
]

#: The most items one bulk call acts on (and the default ``limit``).
MAX_BULK = 1000
#: The most items one bulk call examines when it checks a filter item by item.
SCAN_ITEMS = 10_000
#: The largest event kind a dead-letter filter takes (as ``messages(kind=)``).
_MAX_KIND_CHARS = 200

#: What a bulk call on groups does to each group it selects.
BulkGroupAction = Literal["pause", "resume", "retry_now"]
#: What a bulk call on dead letters does to those it selects.
BulkDeadLetterAction = Literal["redrive", "delete"]

T = TypeVar("T", str, int)


class BulkResult(BaseModel, Generic[T]):
    """What one bulk call did.

    ``matched``: how many items the selection and filter chose (at most the call's
    ``limit``); ``ids`` are those items (group ids, or dead letter ids) in the order acted on.
    ``changed``: how many of them the action changed (a pause of a paused group, a
    ``retry_now`` of a group no longer waiting, a dead letter gone meanwhile do not count);
    0 for a ``dry_run``. ``next_after``: None when nothing further can match; else pass it as
    ``after`` to go on where this call stopped (its bound was reached).
    """

    model_config = ConfigDict(frozen=True)

    action: str
    matched: int
    changed: int
    ids: list[T]
    next_after: T | None = None
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class GroupSelection:
    """A checked selection of groups: ids (sorted, distinct) or None, and the filter."""

    group_ids: tuple[str, ...] | None
    state: GroupStateName | None
    key: str | None
    prefix: str | None
    limit: int
    after: str | None

    def matches(self, info: GroupInfo) -> bool:
        """True if *info* passes the filter (the state, key and prefix given)."""
        if self.state is not None and info.state != self.state:
            return False
        if self.key is not None and (info.fairness_key or DEFAULT_KEY) != self.key:
            return False
        return self.prefix is None or info.group_id.startswith(self.prefix)


@dataclass(frozen=True, slots=True)
class DeadLetterSelection:
    """A checked selection of dead letters: ids (sorted, distinct) or None, and the filter."""

    ids: tuple[int, ...] | None
    prefix: str | None
    kind: str | None
    limit: int
    after: int | None

    def matches(self, letter: DeadLetter) -> bool:
        """True if *letter* passes the filter (its group's prefix and its event kind)."""
        if self.kind is not None and letter.event.kind != self.kind:
            return False
        return self.prefix is None or letter.group_id.startswith(self.prefix)

    @property
    def filtered(self) -> bool:
        """True if a filter is given (each dead letter is checked against it)."""
        return self.prefix is not None or self.kind is not None


def _check_bound(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BULK:
        raise InvalidInput(f"limit must be an int from 1 to {MAX_BULK}, not {limit!r}")
    return limit


def _check_prefix(prefix: object) -> str | None:
    if prefix is None:
        return None
    return check_text_id(prefix, "prefix", MAX_GROUP_ID_BYTES, empty_ok=True)


def _listed(values: object, name: str, limit: int) -> list[object]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidInput(f"{name} must be a list, not {type(values).__name__}")
    listed = list(values)
    if not listed:
        raise InvalidInput(f"{name} must not be empty (pass None to select by a filter)")
    if len(listed) > limit:
        raise InvalidInput(f"{name} holds {len(listed)} items; one call acts on at most {limit}")
    return listed


def check_group_selection(
    *,
    group_ids: object,
    state: object,
    key: object,
    prefix: object,
    limit: object,
    after: object,
) -> GroupSelection:
    """Check the arguments of a bulk call on groups; raises InvalidInput for a bad one, or
    when neither *group_ids* nor a filter (*state*, *key*, *prefix*) is given."""
    bound = _check_bound(limit)
    checked_state = check_group_state(state)
    checked_key = None if key is None else check_policy_key(key)
    checked_prefix = _check_prefix(prefix)
    checked_after = None if after is None else check_text_id(after, "after", MAX_GROUP_ID_BYTES)
    ids: tuple[str, ...] | None = None
    if group_ids is not None:
        listed = _listed(group_ids, "group_ids", bound)
        # Byte order, as groups() pages: one order for the preview and the action.
        ids = tuple(sorted({check_group_id(g) for g in listed}, key=lambda g: g.encode()))
    if ids is None and checked_state is None and checked_key is None and checked_prefix is None:
        raise InvalidInput(
            "a bulk action needs group_ids or a filter (state, key, prefix); "
            "prefix='' selects every group"
        )
    return GroupSelection(ids, checked_state, checked_key, checked_prefix, bound, checked_after)


def check_dead_letter_selection(
    *, ids: object, prefix: object, kind: object, limit: object, after: object
) -> DeadLetterSelection:
    """Check the arguments of a bulk call on dead letters; raises InvalidInput for a bad one,
    or when neither *ids* nor a filter (*prefix*, *kind*) is given."""
    bound = _check_bound(limit)
    checked_prefix = _check_prefix(prefix)
    if kind is not None and (
        not isinstance(kind, str) or not kind or len(kind) > _MAX_KIND_CHARS or "\x00" in kind
    ):
        raise InvalidInput(
            f"kind must be a non-empty str of at most {_MAX_KIND_CHARS} characters, not {kind!r}"
        )
    if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
        raise InvalidInput(f"after must be an int (a dead letter id) or None, not {after!r}")
    checked_ids: tuple[int, ...] | None = None
    if ids is not None:
        listed = _listed(ids, "ids", bound)
        for item in listed:
            if isinstance(item, bool) or not isinstance(item, int):
                raise InvalidInput(f"ids must be ints, not {item!r}")
        checked_ids = tuple(sorted({item for item in listed if isinstance(item, int)}))
    if checked_ids is None and checked_prefix is None and kind is None:
        raise InvalidInput(
            "a bulk action on dead letters needs ids or a filter (prefix, kind); "
            "prefix='' selects every dead letter"
        )
    return DeadLetterSelection(checked_ids, checked_prefix, kind, bound, after)
