"""The concurrent-drain test of the blocking suite: 8 threads, each with its own transport.

Hand-written (not generated): threads and tasks need different synchronisation. Its asyncio
counterpart is ``_concurrency_async.py``.
"""

from __future__ import annotations

import threading
import time

from pgque.conformance._harness_sync import Harness
from pgque.core import Event, Transport

__all__ = ["test_concurrent_drain_threads", "GROUPS", "PER_GROUP", "WORKERS"]

GROUPS = 40
PER_GROUP = 25
WORKERS = 8
#: Only reached when the transport loses a message; a correct run takes a small fraction.
DEADLINE_S = 60.0


def test_concurrent_drain_threads(harness: Harness) -> None:
    """8 threads drain 40 groups x 25 messages: exactly once, FIFO per group, one holder."""
    first = harness.open()
    first.publish_many(
        [
            (f"g{g:02d}", Event(kind="work", data={"seq": seq}))
            for seq in range(PER_GROUP)
            for g in range(GROUPS)
        ]
    )
    workers = [harness.make(queue=first.queue) for _ in range(WORKERS)]
    total = GROUPS * PER_GROUP
    lock = threading.Lock()
    processed: dict[str, list[int]] = {}
    holders: dict[str, int] = {}
    problems: list[str] = []
    done = [0]
    deadline = time.monotonic() + DEADLINE_S

    def work(index: int, transport: Transport) -> None:
        try:
            while True:
                with lock:
                    if done[0] >= total or problems:
                        return
                if time.monotonic() > deadline:
                    with lock:
                        problems.append(f"worker {index} gave up: messages were lost")
                    return
                lease = transport.claim(30.0)
                if lease is None:
                    time.sleep(0.001)
                    continue
                group = lease.group_id
                with lock:
                    if group in holders:
                        problems.append(f"{group} held by {holders[group]} and {index}")
                    holders[group] = index
                time.sleep(0)  # let every other thread try to take the same group
                data = lease.event.data
                seq = data["seq"] if isinstance(data, dict) else None
                with lock:
                    if not isinstance(seq, int):
                        problems.append(f"bad payload {data!r}")
                        return
                    processed.setdefault(group, []).append(seq)
                    done[0] += 1
                    del holders[group]
                if not transport.ack(lease):
                    with lock:
                        problems.append(f"ack of {group}#{seq} was refused")
        except Exception as exc:  # a worker's failure must fail the test, not vanish
            with lock:
                problems.append(f"worker {index} raised {exc!r}")

    threads = [
        threading.Thread(target=work, args=(i, t), name=f"pgque-drain-{i}")
        for i, t in enumerate(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert processed == {f"g{g:02d}": list(range(PER_GROUP)) for g in range(GROUPS)}
    stats = first.stats()
    assert (stats.groups, stats.messages, stats.in_flight) == (0, 0, 0)
