"""What the Redis backend declares of itself: its capabilities, and the origin its leases carry."""

from __future__ import annotations

from pgque.core.models import Capabilities

__all__ = [
    "CAPABILITIES",
    "ORIGIN",
]

CAPABILITIES = Capabilities(
    injected_clock=True,
    priorities=True,
    dead_letters=True,
    transactional_publish=False,
    # Redis acknowledges a write before it reaches disk unless AOF runs with
    # appendfsync always; the transport cannot know, so it does not promise durability.
    durable=False,
    wakeups=True,  # the queue's pub/sub wake channel
    purge=True,
    queues=True,
    scheduling=True,  # scheduled messages and tick records in the queue's keys
    # Fair shares between fairness keys, their policies in the queue's keys: one script per
    # claim applies weights, caps and rates over the whole queue.
    fairness=True,
    global_key_limits=True,
    # Live workers: a hash per worker and a sorted set by heartbeat in the queue's keys.
    workers=True,
    # Job history: a capped stream per queue, appended by the settling scripts
    # (lua/lib/history.lua; docs/history.md).
    history=True,
    # Browse and search: an index of messages by id (<prefix>mg) kept by the scripts that add
    # and remove messages; lua/lib/browse.lua cuts the previews.
    browse=True,
)


#: How Lease.origin of every lease this backend issues starts; the rest names the queue's store
#: (``redis:<identity>``, the value of the queue's meta key: see lua/lib/store.lua's touch_meta).
ORIGIN = "redis"
