"""Four worker processes drain 200 groups x 50 messages: exactly once, FIFO per group, and
never two leases of one group at the same time."""

from __future__ import annotations

import itertools
import multiprocessing
import time
from collections import defaultdict
from typing import Any

import pytest

from pgque.core import Event
from pgque.redis import RedisTransport

GROUPS = 200
PER_GROUP = 50
WORKERS = 4

#: (group, message id, publish sequence in group, attempt, claimed_at, ack_at, acked)
Record = tuple[str, int, int, int, float, float, bool]


def _worker(url: str, queue: str) -> list[Record]:
    """Claim and ack until the queue is empty; time stamps are system-wide monotonic."""
    records: list[Record] = []
    with RedisTransport(url, queue=queue) as transport:
        while True:
            lease = transport.claim(60.0)
            if lease is None:
                if transport.stats().messages == 0:
                    return records
                time.sleep(0.002)
                continue
            claimed_at = time.monotonic()
            assert isinstance(lease.event.data, dict)
            seq = lease.event.data["i"]
            assert isinstance(seq, int)
            ack_at = time.monotonic()
            acked = transport.ack(lease)
            records.append(
                (lease.group_id, lease.message_id, seq, lease.attempt, claimed_at, ack_at, acked)
            )


@pytest.mark.stress  # about 10 s on two busy cores: 20,000 round trips from 4 processes
def test_four_processes_drain_exactly_once_in_order(redis_url: str, new_queue: Any) -> None:
    queue = new_queue()
    with RedisTransport(redis_url, queue=queue) as transport:
        # Interleave groups so every group's messages are spread over the whole backlog.
        items = [
            (f"group-{g:03d}", Event(kind="m", data={"i": i}))
            for i in range(PER_GROUP)
            for g in range(GROUPS)
        ]
        for start in range(0, len(items), 2000):
            transport.publish_many(items[start : start + 2000])
        assert transport.stats().messages == GROUPS * PER_GROUP

        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(WORKERS) as pool:
            results = pool.starmap(_worker, [(redis_url, queue)] * WORKERS)

        stats = transport.stats()
        assert (stats.messages, stats.groups, stats.dead_letters) == (0, 0, 0)

    records = [record for result in results for record in result]
    assert all(len(result) > 0 for result in results), "a worker got nothing to do"
    assert len(records) == GROUPS * PER_GROUP
    assert all(acked and attempt == 1 for *_, attempt, _c, _a, acked in records)
    assert len({record[1] for record in records}) == GROUPS * PER_GROUP  # exactly once

    by_group: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_group[record[0]].append(record)
    assert len(by_group) == GROUPS
    for group, delivered in by_group.items():
        delivered.sort(key=lambda r: r[4])
        assert [r[2] for r in delivered] == list(range(PER_GROUP)), f"{group} out of order"
        for before, after in itertools.pairwise(delivered):
            # The next lease of a group is granted only after the previous one was acked.
            assert before[5] < after[4], f"{group}: overlapping leases"
