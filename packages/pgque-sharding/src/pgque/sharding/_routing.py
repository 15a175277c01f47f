"""Where things live over S shards: the stable hash, the shard list, ids and leases.

Pure: no I/O. The drivers (:mod:`._driver_async` and its generated twin) route by it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.models import DeadLetter, GroupInfo, Lease, ScheduledMessage

__all__ = ["BACKEND", "ShardCodec", "check_shards", "fair_share", "shard_for"]

#: How ``Lease.origin`` of every lease a sharded queue issues starts.
BACKEND = "pgque-sharded"


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


class ShardCodec:
    """Maps ids and leases between the logical queue and its shards (sub-queues).

    A message id, a dead letter id and a scheduled message id of shard *k* with local id
    *local* is ``local * count + k`` in the logical queue: unique across shards, and the
    shard is ``id % count``. A lease's ``origin`` names the sharded store (its sub-queues, in
    order: :attr:`origin`) and its token carries the shard, the shard's own origin and token,
    so any sharded transport over the same shards can settle it.
    """

    def __init__(self, queue: str, sub_queues: Sequence[str]) -> None:
        self.queue = queue
        self.count = len(sub_queues)
        self.sub_queues = list(sub_queues)
        #: ``Lease.origin`` of every lease of this sharded queue
        self.origin = f"{BACKEND}:{json.dumps(self.sub_queues, separators=(',', ':'))}"

    def encode(self, shard: int, local: int) -> int:
        """The logical id of *local* on *shard*."""
        return local * self.count + shard

    def decode(self, global_id: int) -> tuple[int, int]:
        """Return (shard, local id) of a logical id (local < 1 for an id no shard issued)."""
        return global_id % self.count, global_id // self.count

    def shard_of(self, group_id: str) -> int:
        """Return the shard of *group_id*."""
        return shard_for(group_id, self.count)

    def wrap(self, shard: int, lease: Lease) -> Lease:
        """The logical lease for *lease*, issued by *shard*."""
        token = json.dumps([shard, lease.origin, lease.token], separators=(",", ":"))
        return lease.model_copy(
            update={
                "message_id": self.encode(shard, lease.message_id),
                "queue": self.queue,
                "origin": self.origin,
                "token": token,
            }
        )

    def unwrap(self, lease: Lease) -> tuple[int, Lease] | None:
        """Return (shard, the shard's own lease) for a lease of this sharded queue, or None
        when its token is not one a shard issued here (a forged token: not held)."""
        try:
            shard, origin, token = json.loads(lease.token)
        except (TypeError, ValueError):
            return None
        if type(shard) is not int or not 0 <= shard < self.count:
            return None
        if not isinstance(origin, str) or not isinstance(token, str):
            return None
        local, ours = lease.message_id // self.count, lease.message_id % self.count == shard
        # An id that shard never issued must not name one of its messages: 0 matches none.
        update = {"message_id": local if ours else 0, "origin": origin, "token": token}
        return shard, lease.model_copy(update={**update, "queue": self.sub_queues[shard]})

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
        # local * count + shard > after  <=>  local > (after - shard) / count
        return None if after is None else (after - shard) // self.count

    def split_ids(self, ids: Iterable[int]) -> dict[int, list[int]]:
        """Group logical ids by shard, as local ids (ids no shard issued are dropped)."""
        out: dict[int, list[int]] = {}
        for global_id in ids:
            shard, local = self.decode(global_id)
            if local >= 1:
                out.setdefault(shard, []).append(local)
        return out
