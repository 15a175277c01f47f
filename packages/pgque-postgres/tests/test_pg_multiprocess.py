"""Four worker processes drain 200 groups x 50 messages: exactly once, FIFO per group, and no
two workers ever hold a lease on the same group at the same time."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from pgque.core import Event
from pgque.postgres import PostgresTransport

GROUPS = 200
PER_GROUP = 50
WORKERS = 4

#: One worker: claim, note the interval it holds the lease (system-wide monotonic clock), ack;
#: stop after a few empty claims in a row. Run as ``python -c WORKER url queue out``.
WORKER = """
import json, sys, time
from pgque.postgres import PostgresTransport
url, queue, out = sys.argv[1:4]
records, empty = [], 0
with PostgresTransport.from_dsn(url, queue=queue, min_size=1, max_size=1) as transport:
    while empty < 5:
        lease = transport.claim(visibility=120)
        if lease is None:
            empty += 1
            time.sleep(0.05)
            continue
        empty = 0
        held_from = time.monotonic()
        record = [lease.group_id, lease.message_id, lease.event.data["n"], held_from]
        record.append(time.monotonic())
        assert transport.ack(lease), lease
        records.append(record)
with open(out, "w") as f:
    json.dump(records, f)
"""


@pytest.mark.stress
def test_four_processes_drain_exactly_once_in_order_without_overlap(
    transport_factory: Callable[..., PostgresTransport], postgres_url: str, tmp_path: Path
) -> None:
    transport = transport_factory()
    items = [
        (f"g{g:03d}", Event(kind="e", data={"n": n}))
        for n in range(PER_GROUP)
        for g in range(GROUPS)
    ]
    ids: list[int] = []
    for start in range(0, len(items), 2000):
        ids += transport.publish_many(items[start : start + 2000])
    outs = [tmp_path / f"worker{i}.json" for i in range(WORKERS)]
    # The test is about exclusivity and order, not durability: skip the WAL flush per commit
    # (about 2 ms on a slow disk) so the drain takes seconds.
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}options=-c%20synchronous_commit%3Doff"
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, url, transport.queue, str(out)])
        for out in outs
    ]
    for proc in procs:
        assert proc.wait(timeout=300) == 0
    records = [r for out in outs for r in json.loads(out.read_text())]
    per_worker = [len(json.loads(out.read_text())) for out in outs]
    assert all(n > 0 for n in per_worker), per_worker  # every process took part

    # Exactly once.
    assert sorted(r[1] for r in records) == sorted(ids)
    by_group: dict[str, list[list[float]]] = defaultdict(list)
    for group_id, _message_id, n, held_from, held_to in records:
        by_group[group_id].append([held_from, held_to, n])
    assert len(by_group) == GROUPS
    for group_id, spans in by_group.items():
        spans.sort()
        # FIFO: in the order the leases were held, the messages come in publish order.
        assert [int(s[2]) for s in spans] == list(range(PER_GROUP)), group_id
        # No overlap: each lease starts after the previous holder let go.
        for before, after in itertools.pairwise(spans):
            assert after[0] > before[1], (group_id, before, after)
    stats = transport.stats()
    assert (stats.messages, stats.groups, stats.in_flight) == (0, 0, 0)
