"""The limits every check enforces: sizes, counts and durations no input may pass."""

from __future__ import annotations

__all__ = [
    "MAX_GROUP_ID_BYTES",
    "MAX_ENTRY_NAME_BYTES",
    "MAX_REASON_CHARS",
    "MAX_PRIORITY",
    "MAX_VISIBILITY_S",
    "MAX_BATCH",
    "MAX_HOLDER_CHARS",
    "MAX_GROUPS_PAGE",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_EVENT_BYTES",
    "MAX_EVENT_BYTES_LIMIT",
]

MAX_GROUP_ID_BYTES = 512
#: The longest schedule entry name (UTF-8 bytes), see ``publish_tick``.
MAX_ENTRY_NAME_BYTES = 200
MAX_REASON_CHARS = 2000
MAX_PRIORITY = 4
#: A lease or delay longer than a year is a bug, not a wish; refusing it keeps float maths sane.
MAX_VISIBILITY_S = 366 * 24 * 3600.0
MAX_BATCH = 10_000
#: The longest ``holder`` label of a claim, in characters.
MAX_HOLDER_CHARS = 200
#: The largest page of ``groups()``.
MAX_GROUPS_PAGE = 1000
#: ``max_attempts`` when none is given: a poison head is retried this often, then
#: dead-lettered (``on_exhausted="dead_letter"``), so it cannot hold its group forever.
#: ``max_attempts=None`` means unlimited.
DEFAULT_MAX_ATTEMPTS = 10
#: The default cap on one event's JSON text, in UTF-8 bytes. Large enough for any sane message
#: (and the conformance suite's 1 MiB round trip), small enough that one hostile publish cannot
#: fill a worker's memory or a Redis reply buffer.
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024
#: The highest ``max_event_bytes`` a transport accepts (PostgreSQL text stops at 1 GiB, Redis
#: strings at 512 MiB).
MAX_EVENT_BYTES_LIMIT = 256 * 1024 * 1024
