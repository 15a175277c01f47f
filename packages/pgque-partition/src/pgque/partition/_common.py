"""What the blocking and asyncio halves of the partition layer share: the tiers, the failure
policies, the mapping from a partition key to a group, the handler's context and counters."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import Lease
from pgque.core.validation import check_text_id
from pgque.partition.hashing import slot_for

__all__ = [
    "KEY_HEADER",
    "MAX_SLOTS",
    "MAX_KEY_BYTES",
    "DEFAULT_DEDUP_TTL",
    "Exclusive",
    "Ordered",
    "Tier",
    "FailurePolicy",
    "Contention",
    "SlotCountMismatch",
    "KeyContext",
    "ConsumerCounts",
    "check_key",
    "check_dedup",
    "group_for",
    "policy_options",
    "transport_policy",
    "check_policy",
]

#: The event header carrying the partition key (absent for ``partition_key=None``).
KEY_HEADER = "pgque-partition-key"
#: The largest slot count of :class:`Ordered`.
MAX_SLOTS = 256
#: The longest partition key, in UTF-8 bytes (a group id holds the key and a short prefix).
MAX_KEY_BYTES = 480
#: A dedup key's limit: the group id's (it names an effect, stored beside the group).
MAX_DEDUP_KEY_BYTES = 512
#: Seconds a dedup key is remembered when a send gives a key but no TTL.
DEFAULT_DEDUP_TTL = 300.0
#: The longest dedup window: one year, like every other duration of pgque.
_MAX_TTL = 366 * 86400.0

FailurePolicy = Literal["skip", "pause"]
Contention = Literal["drop", "defer"]


class SlotCountMismatch(ConfigurationError):
    """The queue's keys are hashed to another number of slots than this publisher/consumer's.

    Changing N moves keys between slots and would break their order mid-flight: resize by
    draining the queue and cutting over (see docs/partition.md).
    """


@dataclass(frozen=True)
class Exclusive:
    """Tier A: at most one worker handles a key at a time; order is not promised.

    Every event is its own group, so the events of one key, and of different keys, spread over
    all workers; a per-key lock (a transaction-scoped advisory lock on PostgreSQL, a fenced
    ``SET NX PX`` on Redis, an in-process fenced lock in memory) makes handlers of one key take
    turns. *contention* says what a worker does with an event whose key is held by another:
    ``"drop"`` acks it without running the handler (for idempotent "ensure state" handlers;
    counted in :attr:`ConsumerCounts.dropped`), ``"defer"`` nacks it for *defer_delay*
    seconds (an attempt is counted, so ``max_attempts`` also bounds deferrals). *lock_ttl*
    bounds how long a crashed holder keeps the key on Redis and in memory (the PostgreSQL lock
    ends with its transaction); a handler must finish within it.

    Raises InvalidInput for an unknown contention or a non-positive delay or TTL.
    """

    contention: Contention = "drop"
    defer_delay: float = 1.0
    lock_ttl: float = 60.0

    def __post_init__(self) -> None:
        if self.contention not in ("drop", "defer"):
            raise InvalidInput(f"contention must be 'drop' or 'defer', not {self.contention!r}")
        _positive(self.defer_delay, "defer_delay", zero_ok=True)
        _positive(self.lock_ttl, "lock_ttl")


@dataclass(frozen=True)
class Ordered:
    """Tier B: the events of one key are handled in publish order, one at a time.

    ``slots=None`` (default) makes one group per key: unbounded keys, nothing read but the
    key's own head. ``slots=N`` (1-256) hashes keys to N groups,
    ``(hashtextextended(key, 0) % N + N) % N``, as a log-based design would: N is persisted
    per queue and a different N is refused with :class:`SlotCountMismatch`.

    Raises InvalidInput for a slot count outside 1-256.
    """

    slots: int | None = None

    def __post_init__(self) -> None:
        if self.slots is not None and (
            isinstance(self.slots, bool)
            or not isinstance(self.slots, int)
            or not 1 <= self.slots <= MAX_SLOTS
        ):
            raise InvalidInput(f"slots must be None or an int from 1 to {MAX_SLOTS}")


#: Either tier.
Tier = Union[Exclusive, Ordered]  # noqa: UP007 - a runtime alias on Python 3.10 too


def _positive(value: object, name: str, *, zero_ok: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number of seconds, not {value!r}")
    seconds = float(value)
    ok = seconds >= 0 if zero_ok else seconds > 0
    if not ok or not math.isfinite(seconds) or seconds > _MAX_TTL:
        bound = ">= 0" if zero_ok else "> 0"
        raise InvalidInput(f"{name} must be {bound} and at most a year, not {value!r}")
    return seconds


def check_tier(tier: object) -> Tier:
    """Return *tier* if it is an :class:`Exclusive` or :class:`Ordered`; raise InvalidInput."""
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


def check_dedup(dedup_key: object, ttl: object) -> tuple[str, float] | None:
    """Return (key, ttl seconds) for a deduplicated send, None without a key; InvalidInput."""
    if dedup_key is None:
        if ttl is not None:
            raise InvalidInput("dedup_ttl needs a dedup_key")
        return None
    key = check_text_id(dedup_key, "dedup_key", MAX_DEDUP_KEY_BYTES, expected="a non-empty str")
    seconds = DEFAULT_DEDUP_TTL if ttl is None else _positive(ttl, "dedup_ttl")
    return key, seconds


def group_for(tier: Tier, key: str | None, event_id: str) -> str:
    """Return the group an event of *key* is published to under *tier*.

    - Exclusive: ``a:<event id>`` (every event its own group; the key travels in a header).
    - Ordered, one group per key: ``k:<key>``; a None key has the group ``n:``.
    - Ordered, N slots: ``s<N>:<slot>``; a None key goes to slot 0.
    """
    if isinstance(tier, Exclusive):
        return f"a:{event_id}"
    if tier.slots is None:
        return "n:" if key is None else f"k:{key}"
    slot = 0 if key is None else slot_for(key, tier.slots)
    return f"s{tier.slots}:{slot}"


def policy_options(policy: FailurePolicy = "skip", max_attempts: int = 5) -> dict[str, Any]:
    """Return the transport options that implement *policy*: pass them when opening it.

    ``skip``: after *max_attempts* deliveries the event is dead-lettered and its key moves on.
    ``pause``: the group is blocked instead, holding the key's later events (no attempt is
    counted for them) until an operator acks it by ``unblock`` or dead-letters it with
    ``unblock(drop_head=True)``. Raises InvalidInput for an unknown policy.
    """
    if policy not in ("skip", "pause"):
        raise InvalidInput(f"policy must be 'skip' or 'pause', not {policy!r}")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidInput(f"max_attempts must be an int >= 1, not {max_attempts!r}")
    on_exhausted = "block" if policy == "pause" else "dead_letter"
    return {"max_attempts": max_attempts, "on_exhausted": on_exhausted}


def transport_policy(transport: object) -> tuple[int | None, str] | None:
    """Return the (max_attempts, on_exhausted) a pgque transport was opened with, if known."""
    options = getattr(transport, "_options", None)
    options = getattr(options, "common", options)
    max_attempts = getattr(options, "max_attempts", None)
    on_exhausted = getattr(options, "on_exhausted", None)
    if not isinstance(on_exhausted, str):
        return None
    return max_attempts, on_exhausted


def check_policy(tier: Tier, policy: object, transport: object) -> FailurePolicy:
    """Return *policy* after checking it fits *tier* and how *transport* was opened.

    Raises InvalidInput for an unknown policy, ConfigurationError when ``pause`` is asked of
    the Exclusive tier (it keeps no order to hold) or the transport's options contradict it.
    """
    if policy not in ("skip", "pause"):
        raise InvalidInput(f"policy must be 'skip' or 'pause', not {policy!r}")
    known = transport_policy(transport)
    if policy == "pause":
        if isinstance(tier, Exclusive):
            raise ConfigurationError(
                "policy='pause' holds a key's later events in order; the Exclusive tier "
                "keeps no order (use Ordered, or policy='skip')"
            )
        if known is not None and (known[0] is None or known[1] != "block"):
            raise ConfigurationError(
                "policy='pause' needs a transport opened with on_exhausted='block' and "
                "max_attempts set: pass **policy_options('pause', n) when opening it"
            )
        return "pause"
    if known is not None and known[1] == "block":
        raise ConfigurationError(
            "policy='skip' dead-letters exhausted events, but the transport blocks them "
            "(on_exhausted='block'): open it with **policy_options('skip', n)"
        )
    return "skip"


@dataclass(frozen=True)
class KeyContext:
    """What a handler may take as its second argument.

    ``key``: the event's partition key (None for keyless events). ``lease``: the transport
    lease. ``epoch``: the fencing epoch of the Exclusive tier's lock on Redis and in memory
    (it grows with every grant of a key: pass it to a store that refuses older epochs), else
    None. ``connection``: on PostgreSQL under the Exclusive tier, the connection whose open
    transaction holds the key's advisory lock; do the handler's database work on it and it
    commits with the lock's release (rolls back if the handler raises).
    """

    key: str | None
    lease: Lease
    epoch: int | None = None
    connection: Any = None


@dataclass
class ConsumerCounts:
    """What a partition consumer did, beyond the worker's report (thread-safe counters).

    ``ran``: handler calls; ``dropped``: events acked unrun because their key was held
    (Exclusive, ``drop``); ``deferred``: events nacked for that reason (``defer``).
    """

    ran: int = 0
    dropped: int = 0
    deferred: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str) -> None:
        """Count one *name* (``ran``, ``dropped`` or ``deferred``)."""
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)
