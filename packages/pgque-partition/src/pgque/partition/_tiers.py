"""The tiers and where their events go (keys, groups, slot counts, dedup windows), no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import Event
from pgque.core.partition_base import DEFAULT_DEDUP_TTL, check_dedup, positive_seconds
from pgque.core.validation import check_seconds, check_text_id
from pgque.partition.hashing import slot_for

__all__ = [
    "KEY_HEADER",
    "MAX_SLOTS",
    "DEFAULT_DEDUP_TTL",
    "Contention",
    "Exclusive",
    "Ordered",
    "Tier",
    "SlotCountMismatch",
    "check_tier",
    "check_key",
    "check_dedup",
    "check_slot_count",
    "group_for",
    "keyed_event",
    "positive_seconds",
]

#: The event header carrying the partition key (absent for ``partition_key=None``).
KEY_HEADER = "pgque-partition-key"
#: The largest slot count of :class:`Ordered`.
MAX_SLOTS = 256
#: The longest partition key, in UTF-8 bytes (a group id holds the key and a short prefix).
MAX_KEY_BYTES = 480

Contention = Literal["drop", "defer"]


@dataclass(frozen=True)
class Exclusive:
    """Tier A: one worker at a time per key, in no promised order; an event whose key another
    worker holds is acked unrun (``"drop"``) or nacked for *defer_delay* seconds (``"defer"``);
    a crashed holder keeps a key for *lock_ttl* seconds. Raises InvalidInput for a bad value."""

    contention: Contention = "drop"
    defer_delay: float = 1.0
    lock_ttl: float = 60.0

    def __post_init__(self) -> None:
        if self.contention not in get_args(Contention):
            raise InvalidInput(f"contention must be 'drop' or 'defer', not {self.contention!r}")
        check_seconds(self.defer_delay, "defer_delay")
        positive_seconds(self.lock_ttl, "lock_ttl")


@dataclass(frozen=True)
class Ordered:
    """Tier B: one key's events one at a time in publish order, in one group per key or hashed
    to *slots* groups (1-256, persisted per queue). Raises InvalidInput for another count."""

    slots: int | None = None

    def __post_init__(self) -> None:
        slots = self.slots
        if slots is not None and (type(slots) is not int or not 0 < slots <= MAX_SLOTS):
            raise InvalidInput(f"slots must be None or an int from 1 to {MAX_SLOTS}")


#: Either tier.
Tier = Union[Exclusive, Ordered]  # noqa: UP007 - a runtime alias on Python 3.10 too


class SlotCountMismatch(ConfigurationError):
    """The queue's keys are hashed to another number of slots than this publisher/consumer's
    (a new N would move keys between slots and break their order: see docs/partition.md)."""


def check_tier(tier: object) -> Tier:
    """Return *tier* (default :class:`Ordered`) if it is a tier; raise InvalidInput."""
    if tier is None:
        return Ordered()
    if not isinstance(tier, (Exclusive, Ordered)):
        raise InvalidInput(f"tier must be Exclusive(...) or Ordered(...), not {tier!r}")
    return tier


def check_key(key: object) -> str | None:
    """Return *key* if it is None or a str usable as a partition key; raise InvalidInput."""
    if key is None:
        return None
    return check_text_id(
        key, "partition_key", MAX_KEY_BYTES, empty_ok=True, expected="a str or None"
    )


def check_slot_count(queue: str, slots: int, in_force: int) -> None:
    """Raise SlotCountMismatch unless *queue*'s persisted slot count *in_force* is *slots*."""
    if in_force != slots:
        raise SlotCountMismatch(
            f"queue {queue!r} hashes keys to {in_force} slots, not {slots}: changing N would "
            f"move keys between slots and break their order. Use Ordered(slots={in_force}), "
            "or resize by draining the queue and cutting over (docs/partition.md)"
        )


def group_for(tier: Tier, key: str | None, event_id: str) -> str:
    """Return the group of an event of *key* under *tier*: ``a:<event id>`` (Exclusive),
    ``k:<key>`` or ``n:`` for no key (Ordered), ``s<N>:<slot>``, slot 0 for no key (N slots)."""
    if isinstance(tier, Exclusive):
        return f"a:{event_id}"
    if tier.slots is None:
        return "n:" if key is None else f"k:{key}"
    return f"s{tier.slots}:{0 if key is None else slot_for(key, tier.slots)}"


def keyed_event(
    kind: str, data: Any, key: str | None, headers: Mapping[str, str] | None, event_id: str | None
) -> Event:
    """Return the event a send publishes: *headers* and the key's, *data*, *event_id* if given."""
    keyed = {**(headers or {}), **({} if key is None else {KEY_HEADER: key})}
    given_id = {} if event_id is None else {"id": event_id}
    return Event(kind=kind, data={} if data is None else data, headers=keyed, **given_id)
