"""The keys of a queue in Redis: their prefix (one hash tag, so one Redis Cluster slot), the
keys every script declares, and the keys that say a queue exists (found by SCAN); and the
partition adapters' lock keys.

The keys under the prefix are listed in ``lua/lib/keys.lua``.
"""

from __future__ import annotations

from pgque.core.errors import InvalidInput
from pgque.core.validation import check_queue_name

__all__ = [
    "key_prefix",
    "script_keys",
    "QUEUE_MARKER_PATTERNS",
    "queue_of_marker",
    "LOCK_PREFIX",
]

#: The key of a partition key's lock (the partition adapters') is this prefix and the key.
LOCK_PREFIX = "pgque:lock:"


def key_prefix(queue: str) -> str:
    """Return the prefix of every key of *queue*; its hash tag pins the queue to one slot."""
    return f"{{pgque:{queue}}}:"


def script_keys(prefix: str) -> tuple[str, str]:
    """Return the keys every script declares: the queue's meta key and its fence
    (``lua/lib/keys.lua``).

    The fence never exists; declaring it with the meta key makes Redis Cluster refuse the
    script (TRYAGAIN) on both nodes while the queue's slot is migrating.
    """
    return prefix + "meta", prefix + "fence"


#: SCAN patterns of the keys that exist exactly while a queue holds messages (``enq``), dead
#: letters (``dead``), groups (``groups``: a paused group may have no message) or scheduled
#: messages (``sched``); Redis deletes a sorted set when its last member goes.
QUEUE_MARKER_PATTERNS = ("{pgque:*}:enq", "{pgque:*}:dead", "{pgque:*}:groups", "{pgque:*}:sched")
_MARKERS = tuple(pattern[len("{pgque:*}") :] for pattern in QUEUE_MARKER_PATTERNS)


def queue_of_marker(key: str) -> str | None:
    """Return the queue whose ``enq``/``dead``/``groups``/``sched`` key *key* is, else None.

    The glob ``*`` also matches a group's list key whose group id ends in ``}:enq``; a queue
    name never holds ``}``, so the hash tag ends at the first one and the rest must be exact.
    """
    if not key.startswith("{pgque:"):
        return None
    name, sep, rest = key[len("{pgque:") :].partition("}")
    if not sep or rest not in _MARKERS:
        return None
    try:
        return check_queue_name(name)
    except InvalidInput:
        return None
