"""Sub-queue names of one logical queue whose hash slots cover a Redis Cluster's primaries.

A queue lives in one slot, so one queue is served by one primary. A layer that spreads one
logical queue over several sub-queues wants their slots on different primaries, as evenly as
possible: :func:`spread_queue_names` picks such names from the cluster's slot map.
"""

from __future__ import annotations

from typing import Any

from redis.crc import key_slot
from redis.exceptions import RedisError

from pgque.core.errors import ConnectionLost, InvalidInput
from pgque.core.validation import check_queue_name
from pgque.redis._keys import key_prefix

__all__ = ["spread_queue_names", "MAX_SPREAD"]

#: The most sub-queue names one call returns.
MAX_SPREAD = 1024
#: Candidate names tried per name asked for before giving up on an even spread.
_TRIES_PER_NAME = 512


def _slot_owners(client: Any) -> list[tuple[int, int, str]]:
    """Return (first slot, last slot, primary "host:port") of every slot range *client* sees.

    A plain (non-cluster) Redis client, or a server without cluster support, is one node
    serving every slot.
    """
    if hasattr(client, "cluster_slots") and hasattr(client, "get_primaries"):
        ranges = client.cluster_slots()  # redis-py's RedisCluster: {(first, last): {...}}
        return [
            (int(first), int(last), f"{info['primary'][0]}:{info['primary'][1]}")
            for (first, last), info in ranges.items()
        ]
    return [(0, 16383, "standalone")]


def _owner(ranges: list[tuple[int, int, str]], slot: int) -> str:
    for first, last, node in ranges:
        if first <= slot <= last:
            return node
    return "uncovered"  # pragma: no cover - a cluster reporting ok covers every slot


def spread_queue_names(client: Any, queue: str, count: int) -> list[str]:
    """Return *count* sub-queue names of *queue* (``<queue>_<n>``, n ascending) whose hash
    slots spread over the cluster's primaries as evenly as possible.

    *client* is a blocking ``redis.cluster.RedisCluster``, a :class:`~pgque.redis.RedisTransport`
    (its client is used) or any object with such a ``client``; a plain ``redis.Redis`` is one
    node, which every name lands on (names ``<queue>_0`` ... in order). Each primary gets
    ``count // primaries`` names or one more; with fewer names than primaries, each name is on
    a primary of its own. The result depends on the slot map at the time of the call: after a
    reshard, an existing name keeps its slot but may have changed node. Raises InvalidInput for
    a bad queue name (or one too long for a suffix) or a count outside 1 to 1024,
    ConnectionLost when the slot map cannot be read.
    """
    queue = check_queue_name(queue)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SPREAD:
        raise InvalidInput(f"count must be an int from 1 to {MAX_SPREAD}, not {count!r}")
    check_queue_name(f"{queue}_{MAX_SPREAD * _TRIES_PER_NAME}")  # the longest name it may make
    inner = getattr(client, "client", None)
    if inner is not None and not hasattr(client, "cluster_slots"):
        client = inner
    try:
        ranges = _slot_owners(client)
    except RedisError as exc:
        raise ConnectionLost(f"cannot read the cluster's slot map: {exc}") from exc
    nodes = sorted({node for _, _, node in ranges})
    base, extra = divmod(count, len(nodes))
    # Every node may take `base` names; `extra` of them one more (the first to ask).
    quota = dict.fromkeys(nodes, base)
    bonus = extra
    names: list[str] = []
    for n in range(count * _TRIES_PER_NAME):
        name = f"{queue}_{n}"
        node = _owner(ranges, key_slot(key_prefix(name).encode()))
        if quota.get(node, 0) > 0:
            quota[node] -= 1
        elif bonus > 0 and quota.get(node, -1) == 0:
            bonus -= 1
            quota[node] = -1  # took its one extra name
        else:
            continue
        names.append(name)
        if len(names) == count:
            return names
    raise InvalidInput(  # pragma: no cover - a slot map this lopsided needs a reshard
        f"found no even spread of {count} names of {queue!r} over {len(nodes)} nodes"
    )
