"""Test support: transport factory types, fresh queue names and the Redis clean-up, and a
recorder of handler runs (enter/exit times per key) with the checks the experiments assert.

Test modules import these from here, never from ``conftest``: a type checker that sees every
package's tests finds several modules named ``conftest``."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable

import redis

from pgque.core import AsyncTransport, Transport
from pgque.redis import key_prefix

#: ``make(queue=None, **options)``: a blocking transport of the backend under test.
Make = Callable[..., Transport]
#: ``await amake(queue=None, **options)``: an asyncio transport of the backend under test.
AMake = Callable[..., Awaitable[AsyncTransport]]


def fresh_queue() -> str:
    """Return a queue name no other test uses."""
    return f"p_{uuid.uuid4().hex[:20]}"


def _drop_redis(url: str, queue: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        pattern = key_prefix(queue).replace("[", "\\[") + "*"
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


class Recorder:
    """Thread-safe log of (key -> [(enter, exit)]) and of per-key arrival order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.intervals: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.order: dict[str, list[int]] = defaultdict(list)
        self.active: dict[str, int] = defaultdict(int)
        self.max_active: dict[str, int] = defaultdict(int)
        self.did_work = 0
        self.done: set[str] = set()

    def enter(self, key: str) -> float:
        with self.lock:
            self.active[key] += 1
            self.max_active[key] = max(self.max_active[key], self.active[key])
        return time.monotonic()

    def exit(self, key: str, started: float) -> None:
        ended = time.monotonic()
        with self.lock:
            self.active[key] -= 1
            self.intervals[key].append((started, ended))

    def ensure(self, key: str, pause: float = 0.0005) -> None:
        """An idempotent "ensure state" step with a check-then-act window."""
        if key in self.done:
            return
        time.sleep(pause)  # widens the race a missing lock would lose
        with self.lock:
            self.did_work += 1
        self.done.add(key)

    def overlaps(self) -> int:
        """Return how many times two runs of one key overlapped in time."""
        count = 0
        for spans in self.intervals.values():
            spans = sorted(spans)
            for (_, end), (start, _) in itertools.pairwise(spans):
                if start < end:
                    count += 1
        return count

    def runs(self) -> int:
        return sum(len(v) for v in self.intervals.values())
