"""What both sharded transports share: the stable hash, the id and lease codec, merging.

Nothing here does I/O; :mod:`._async` (and its generated twin :mod:`._sync`) call shards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import (
    Capabilities,
    DeadLetter,
    GroupInfo,
    Lease,
    QueueStats,
    ScheduledMessage,
    Settlement,
)
from pgque.core.validation import check_group_id

__all__ = [
    "shard_for",
    "ShardCodec",
    "sharded_capabilities",
    "merge_stats",
    "merge_by",
    "fair_share",
    "log",
]

log = logging.getLogger("pgque.sharding")

#: The prefix of ``Lease.origin`` on every lease a sharded transport issues.
_ORIGIN_PREFIX = "pgque-sharded:"

T = TypeVar("T")


def shard_for(key: str, count: int) -> int:
    """Return the shard (0 to *count* - 1) that *key* (a group id or schedule entry) lives on.

    The hash is stable across processes, machines and pgque versions: the first 8 bytes of
    the SHA-256 digest of *key* encoded as UTF-8, read as an unsigned big-endian integer,
    modulo *count*. Python's ``hash()`` is salted per process and is never used. Raises
    InvalidInput for a *key* that is not a str or a *count* below 1.
    """
    if not isinstance(key, str):
        raise InvalidInput(f"a shard key must be a str, not {type(key).__name__}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidInput(f"count must be an int of at least 1, not {count!r}")
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count


def fair_share(remaining: int, shards_left: int) -> int:
    """How many of *remaining* leases to ask of the next of *shards_left* shards (rounded up)."""
    return -(-remaining // shards_left) if shards_left > 0 else remaining


def merge_by(pages: Iterable[Sequence[T]], key: Any, limit: int) -> list[T]:
    """Merge *pages* (each sorted by *key*) and keep the first *limit* items."""
    out: list[T] = []
    for item in heapq.merge(*pages, key=key):
        if len(out) == limit:
            break
        out.append(item)
    return out


def _min(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def merge_stats(parts: Sequence[QueueStats]) -> QueueStats:
    """Sum the counts of the shards' stats; the oldest age is the largest, the next times the
    soonest. The parts are read one after another: the sum is not one snapshot."""
    return QueueStats(
        groups=sum(p.groups for p in parts),
        messages=sum(p.messages for p in parts),
        in_flight=sum(p.in_flight for p in parts),
        parked=sum(p.parked for p in parts),
        blocked=sum(p.blocked for p in parts),
        dead_letters=sum(p.dead_letters for p in parts),
        oldest_age_s=_max(p.oldest_age_s for p in parts),
        next_resume_at=_min(p.next_resume_at for p in parts),
        paused=sum(p.paused for p in parts),
        scheduled=sum(p.scheduled for p in parts),
        next_due_at=_min(p.next_due_at for p in parts),
    )


#: Flags whose promise does not survive the sharded layer, whatever the shards declare.
_PER_SHARD_FLAGS = ("global_id_order", "global_fairness", "atomic_stats", "atomic_batches")
#: Flags the sharded layer does not offer at all.
_NOT_OFFERED = ("transactional_publish", "queues")


def sharded_capabilities(parts: Sequence[Capabilities]) -> Capabilities:
    """Return what a sharded transport over shards with capabilities *parts* supports.

    A flag holds if every shard declares it, except the per-shard promises (off) and
    ``transactional_publish`` and ``queues`` (not offered by the sharded layer).
    """
    values: dict[str, bool] = {}
    for f in dataclasses.fields(Capabilities):
        values[f.name] = all(bool(getattr(p, f.name)) for p in parts)
    for name in _PER_SHARD_FLAGS + _NOT_OFFERED:
        values[name] = False
    return Capabilities(**values)


class ShardCodec:
    """Maps ids and leases between the logical queue and its *count* shards.

    A message id, a dead letter id and a scheduled message id of shard *k* with local id
    *local* is ``local * count + k`` in the logical queue: unique across shards, and the
    shard is ``id % count``. A lease keeps the shard's token and carries, in ``origin``, the
    shard, the shard count and the shard's own queue and origin, so any sharded transport
    over the same shards can settle it.
    """

    def __init__(self, queue: str, count: int, sub_queues: Sequence[str]) -> None:
        self.queue = queue
        self.count = count
        self.sub_queues = list(sub_queues)

    def encode(self, shard: int, local: int) -> int:
        """The logical id of *local* on *shard*."""
        return local * self.count + shard

    def decode(self, global_id: int) -> tuple[int, int]:
        """Return (shard, local id) of a logical id (local < 1 for an id no shard issued)."""
        return global_id % self.count, global_id // self.count

    def shard_of_group(self, group_id: object) -> int:
        """Return the shard of *group_id*; raises InvalidInput for a bad group id."""
        return shard_for(check_group_id(group_id), self.count)

    # -- leases --------------------------------------------------------------------------

    def wrap(self, shard: int, lease: Lease) -> Lease:
        """The logical lease for *lease*, issued by *shard*."""
        origin = _ORIGIN_PREFIX + json.dumps(
            [shard, self.count, lease.queue, lease.origin], separators=(",", ":")
        )
        return lease.model_copy(
            update={
                "message_id": self.encode(shard, lease.message_id),
                "queue": self.queue,
                "origin": origin,
            }
        )

    def unwrap(self, lease: object) -> tuple[int, Lease]:
        """Return (shard, the shard's own lease) for a logical lease.

        Raises InvalidInput for anything but a lease this sharded queue issued.
        """
        if not isinstance(lease, Lease):
            raise InvalidInput(f"expected a Lease, not {type(lease).__name__}")
        foreign = InvalidInput(
            f"this lease belongs to queue {lease.queue!r} of another transport, "
            f"not to the sharded queue {self.queue!r} here"
        )
        if lease.queue != self.queue or not lease.origin.startswith(_ORIGIN_PREFIX):
            raise foreign
        try:
            shard, count, sub_queue, origin = json.loads(lease.origin[len(_ORIGIN_PREFIX) :])
        except ValueError as exc:
            raise foreign from exc
        if (
            count != self.count
            or not isinstance(shard, int)
            or not 0 <= shard < count
            or sub_queue != self.sub_queues[shard]
            or not isinstance(origin, str)
        ):
            raise foreign
        local, ours = lease.message_id // count, lease.message_id % count == shard
        # An id that shard never issued must not name one of its messages: 0 matches none.
        inner = lease.model_copy(
            update={"message_id": local if ours else 0, "queue": sub_queue, "origin": origin}
        )
        return shard, inner

    def unwrap_settlement(self, settlement: object) -> tuple[int, Settlement]:
        """Return (shard, the settlement with the shard's own lease)."""
        if not isinstance(settlement, Settlement):
            raise InvalidInput(f"expected a Settlement, not {type(settlement).__name__}")
        shard, inner = self.unwrap(settlement.lease)
        return shard, dataclasses.replace(settlement, lease=inner)

    # -- records -------------------------------------------------------------------------

    def group(self, shard: int, info: GroupInfo) -> GroupInfo:
        """The logical view of a shard's group record."""
        if info.head_message_id is None:
            return info
        return info.model_copy(update={"head_message_id": self.encode(shard, info.head_message_id)})

    def dead_letter(self, shard: int, letter: DeadLetter) -> DeadLetter:
        """The logical view of a shard's dead letter."""
        return letter.model_copy(
            update={
                "id": self.encode(shard, letter.id),
                "message_id": self.encode(shard, letter.message_id),
            }
        )

    def scheduled(self, shard: int, message: ScheduledMessage) -> ScheduledMessage:
        """The logical view of a shard's scheduled message."""
        return message.model_copy(update={"id": self.encode(shard, message.id)})

    def local_after(self, shard: int, after: int | None) -> int | None:
        """The local id on *shard* to list after, for the logical id *after*."""
        if after is None:
            return None
        # local * count + shard > after  <=>  local > (after - shard) / count
        return (after - shard) // self.count

    def split_ids(self, ids: Iterable[int]) -> dict[int, list[int]]:
        """Group logical ids by shard, as local ids (ids no shard issued are dropped)."""
        out: dict[int, list[int]] = {}
        for global_id in ids:
            shard, local = self.decode(global_id)
            if local >= 1:
                out.setdefault(shard, []).append(local)
        return out


def check_shards(shards: object, kind: type) -> list[Any]:
    """Return *shards* as a list after checking it: at least one, each a *kind*, no repeats,
    all with one ``max_attempts`` and ``on_exhausted``. Raises ConfigurationError."""
    if isinstance(shards, (str, bytes)) or not isinstance(shards, Sequence):
        raise ConfigurationError("shards must be a sequence of transports")
    found = list(shards)
    if not found:
        raise ConfigurationError("a sharded transport needs at least one shard")
    for i, shard in enumerate(found):
        if not isinstance(shard, kind):
            raise ConfigurationError(
                f"shard {i} is a {type(shard).__name__}, not a {kind.__name__}"
            )
    if len({id(s) for s in found}) != len(found):
        raise ConfigurationError("a transport is given twice as a shard")
    policies = {(s.max_attempts, s.on_exhausted) for s in found}
    if len(policies) != 1:
        raise ConfigurationError(
            "every shard must have the same max_attempts and on_exhausted, not "
            + ", ".join(f"{a}/{b}" for a, b in sorted(policies, key=str))
        )
    return found
