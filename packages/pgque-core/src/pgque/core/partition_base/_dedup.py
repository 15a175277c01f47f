"""The dedup window's arguments, checked before any I/O (pgque.partition's ``send`` and the
tasks' ``defer`` take the same ``dedup_key`` / ``dedup_ttl``)."""

from __future__ import annotations

from pgque.core.errors import InvalidInput
from pgque.core.validation import MAX_GROUP_ID_BYTES, check_seconds, check_text_id

__all__ = ["DEFAULT_DEDUP_TTL", "check_dedup", "positive_seconds"]

#: Seconds a dedup key is remembered when a publish gives a key but no TTL.
DEFAULT_DEDUP_TTL = 300.0


def positive_seconds(value: object, name: str) -> float:
    """Return *value* as seconds above 0 and at most a year; raise InvalidInput."""
    seconds = check_seconds(value, name)
    if seconds == 0:
        raise InvalidInput(f"{name} must be > 0, not {value!r}")
    return seconds


def check_dedup(
    dedup_key: object, ttl: object, default_ttl: float = DEFAULT_DEDUP_TTL
) -> tuple[str, float] | None:
    """Return (key, seconds) for a publish with *dedup_key* (it has a group id's limit), None
    for one without; raise InvalidInput."""
    if dedup_key is None:
        if ttl is not None:
            raise InvalidInput("dedup_ttl needs a dedup_key")
        return None
    key = check_text_id(dedup_key, "dedup_key", MAX_GROUP_ID_BYTES, expected="a non-empty str")
    return key, default_ttl if ttl is None else positive_seconds(ttl, "dedup_ttl")
