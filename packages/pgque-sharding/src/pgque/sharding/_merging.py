"""One answer from the shards' answers: pages, stats, capabilities and wake-ups.

Pure: no I/O. The drivers (:mod:`._driver_async` and its generated twin) and the waits
(:mod:`._wait_async`, :mod:`._wait_threads`) merge by it.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pgque.core.errors import ConnectionLost
from pgque.core.models import Capabilities, KeyInfo, QueueStats

__all__ = [
    "abilities",
    "merge_by",
    "merge_key",
    "merge_keys",
    "merge_stats",
    "merge_waits",
    "sharded_capabilities",
]

T = TypeVar("T")

#: Flags whose promise does not survive the sharded layer, whatever the shards declare.
_PER_SHARD_FLAGS = (
    "global_id_order",
    "global_fairness",
    "atomic_stats",
    "atomic_batches",
    "global_key_limits",
)
#: Flags the sharded layer does not offer at all.
_NOT_OFFERED = ("transactional_publish", "queues", "settle_in", "history", "workers", "browse")


def merge_by(pages: Iterable[Sequence[T]], key: Callable[[T], Any], limit: int) -> list[T]:
    """Merge *pages* (each sorted by *key*) and keep the first *limit* items."""
    return list(itertools.islice(heapq.merge(*pages, key=key), limit))


def _least(values: Iterable[float | None]) -> float | None:
    return min((v for v in values if v is not None), default=None)


def merge_stats(parts: Sequence[QueueStats]) -> QueueStats:
    """Sum the counts of the shards' stats; the oldest age is the largest, the next times the
    soonest. The parts are read one after another: the sum is not one snapshot."""
    ages = [p.oldest_age_s for p in parts if p.oldest_age_s is not None]
    return QueueStats(
        groups=sum(p.groups for p in parts),
        messages=sum(p.messages for p in parts),
        in_flight=sum(p.in_flight for p in parts),
        parked=sum(p.parked for p in parts),
        blocked=sum(p.blocked for p in parts),
        dead_letters=sum(p.dead_letters for p in parts),
        oldest_age_s=max(ages, default=None),
        next_resume_at=_least(p.next_resume_at for p in parts),
        paused=sum(p.paused for p in parts),
        scheduled=sum(p.scheduled for p in parts),
        next_due_at=_least(p.next_due_at for p in parts),
    )


def merge_keys(pages: Sequence[Sequence[KeyInfo]], limit: int) -> list[KeyInfo]:
    """One page of keys from the shards' pages (each the first keys after the same cursor, in
    UTF-8 byte order): the first *limit* keys of their union, each summed over the shards
    that list it. Complete: a key among the union's first *limit* is among the first *limit*
    of every shard that has it. Tokens add up (each shard has its own bucket); the next token
    is the soonest; the policy is the first shard's (the layer writes every shard's)."""
    by_key: dict[str, list[KeyInfo]] = {}
    for page in pages:
        for info in page:
            by_key.setdefault(info.key, []).append(info)
    ordered = sorted(by_key, key=lambda k: k.encode())[:limit]
    return [merge_key(by_key[k]) for k in ordered]


def merge_key(parts: Sequence[KeyInfo]) -> KeyInfo:
    """One key's view from the views of the shards that have it (see :func:`merge_keys`)."""
    first = parts[0]
    ages = [p.oldest_age_s for p in parts if p.oldest_age_s is not None]
    tokens = [p.tokens for p in parts if p.tokens is not None]
    return KeyInfo(
        key=first.key,
        policy=first.policy,
        own_policy=any(p.own_policy for p in parts),
        in_flight=sum(p.in_flight for p in parts),
        groups=sum(p.groups for p in parts),
        messages=sum(p.messages for p in parts),
        oldest_age_s=max(ages, default=None),
        tokens=sum(tokens) if tokens else None,
        next_token_at=_least(p.next_token_at for p in parts),
    )


def abilities(shards: object) -> tuple[bool, bool, bool]:
    """Whether every one of *shards* has wake-ups, whether every one can purge, and whether
    every one has fairness keys: the method and its capability flag both (all False for
    anything but a non-empty sequence)."""
    listed = list(shards) if isinstance(shards, Sequence) else []

    def every(method: str, flag: str) -> bool:
        return bool(listed) and all(
            hasattr(s, method) and bool(getattr(getattr(s, "capabilities", None), flag, False))
            for s in listed
        )

    return (
        every("wait_for_messages", "wakeups"),
        every("purge", "purge"),
        every("set_key_policy", "fairness"),
    )


def sharded_capabilities(
    parts: Sequence[Capabilities], wakeups: bool, purge: bool, fairness: bool
) -> Capabilities:
    """Return what a sharded queue over shards with capabilities *parts* supports.

    A flag holds if every shard declares it, except the per-shard promises (off),
    ``transactional_publish``, ``queues``, ``settle_in``, ``history``, ``workers`` and
    ``browse`` (not
    offered by the sharded layer), and ``wakeups``, ``purge`` and ``fairness``, given.
    """
    values = {
        f.name: all(bool(getattr(p, f.name)) for p in parts)
        for f in dataclasses.fields(Capabilities)
    }
    values.update(dict.fromkeys(_PER_SHARD_FLAGS + _NOT_OFFERED, False))
    given = {"wakeups": wakeups, "purge": purge, "fairness": fairness}
    return Capabilities(**{**values, **given})


def merge_waits(woken: bool, errors: Sequence[BaseException], asked: int) -> bool:
    """The answer of a wait on *asked* shards at once: True if one said True; else the first
    error when every shard failed, or the first that is not ConnectionLost (a shard that
    could not be reached is left out while the others wait); else False."""
    if woken:
        return True
    if errors and len(errors) == asked:
        raise errors[0]
    for error in errors:
        if not isinstance(error, ConnectionLost):
            raise error
    return False
