"""The consumer's side, without I/O: failure policies, what a handler is given, the counts."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import Lease
from pgque.core.transport_options import OnExhausted, TransportOptions
from pgque.partition._tiers import Exclusive, Tier

__all__ = ["FailurePolicy", "policy_options", "check_policy", "KeyContext", "ConsumerCounts"]

FailurePolicy = Literal["skip", "pause"]


def _checked(policy: object) -> FailurePolicy:
    if policy not in get_args(FailurePolicy):
        raise InvalidInput(f"policy must be 'skip' or 'pause', not {policy!r}")
    return "pause" if policy == "pause" else "skip"


def policy_options(policy: FailurePolicy = "skip", max_attempts: int = 5) -> dict[str, Any]:
    """Return the options to open a transport with for *policy*: after *max_attempts*
    deliveries ``skip`` dead-letters the event, ``pause`` blocks its group (and so its key)
    until an operator unblocks it. Raises InvalidInput for a bad policy or *max_attempts*."""
    on_exhausted: OnExhausted = "block" if _checked(policy) == "pause" else "dead_letter"
    options = TransportOptions(max_attempts=max_attempts, on_exhausted=on_exhausted)
    if options.max_attempts is None:
        raise InvalidInput("max_attempts must be an int >= 1, not None")
    return {"max_attempts": options.max_attempts, "on_exhausted": options.on_exhausted}


def check_policy(tier: Tier, policy: object, transport: object) -> FailurePolicy:
    """Return *policy* once it fits *tier* and *transport*'s options; raise InvalidInput for an
    unknown policy, ConfigurationError for ``pause`` under Exclusive or contrary options."""
    checked = _checked(policy)
    blocks = getattr(transport, "on_exhausted", None) == "block"
    if checked == "skip" and blocks:
        raise ConfigurationError(
            "policy='skip' dead-letters exhausted events, but the transport blocks them "
            "(on_exhausted='block'): open it with **policy_options('skip', n)"
        )
    if checked == "pause" and isinstance(tier, Exclusive):
        raise ConfigurationError(
            "policy='pause' holds a key's later events in order; the Exclusive tier "
            "keeps no order (use Ordered, or policy='skip')"
        )
    if checked == "pause" and (not blocks or getattr(transport, "max_attempts", None) is None):
        raise ConfigurationError(
            "policy='pause' needs a transport opened with on_exhausted='block' and "
            "max_attempts set: pass **policy_options('pause', n) when opening it"
        )
    return checked


@dataclass(frozen=True)
class KeyContext:
    """A handler's second argument: the event's ``key`` and ``lease``; under Exclusive the
    lock's fencing ``epoch`` (Redis, memory) or the ``connection`` whose transaction holds it
    (PostgreSQL: the handler's work on it commits with the lock's release)."""

    key: str | None
    lease: Lease
    epoch: int | None = None
    connection: Any = None


@dataclass
class ConsumerCounts:
    """What a partition consumer did besides the worker's report (thread-safe): handler calls
    (``ran``), events acked or nacked unrun for a held key (``dropped``, ``deferred``)."""

    ran: int = 0
    dropped: int = 0
    deferred: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str) -> None:
        """Count one *name* (``ran``, ``dropped`` or ``deferred``)."""
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)
