"""PLACEHOLDER"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from conftest import _drop_redis, fresh_queue

from pgque.conformance.clock import FakeClock
from pgque.partition import KeyedPublisher, Ordered, SlotCountMismatch, partition_backend_sync
from pgque.redis import RedisTransport


class BetweenRoundTrips(redis.Redis):
    """A real redis-py client that runs a hook before each of its round trips but the first,
    while armed: the hook is "another client", landing between two calls of one operation. An
    operation made of one round trip leaves it no room (it then runs after the operation)."""

    hook: Callable[[], None] | None = None
    calls = 0
    fired = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        hook = self.hook
        if hook is not None:
            self.calls += 1
            if self.calls > 1 and not self.fired:
                self.fired += 1
                hook()
        return super().execute_command(*args, **options)

    def run_armed(self, operation: Callable[[], object], hook: Callable[[], None]) -> None:
        """Run *operation*, with *hook* between its first two round trips (or after it)."""
        self.hook, self.calls, self.fired = hook, 0, 0
        try:
            operation()
        finally:
            self.hook = None
        if not self.fired:
            hook()


@pytest.fixture
def between(redis_url: str) -> Iterator[tuple[RedisTransport, BetweenRoundTrips, str]]:
    """A transport on a fresh queue whose client is a :class:`BetweenRoundTrips`."""
    queue = fresh_queue()
    client = BetweenRoundTrips.from_url(redis_url)
    transport = RedisTransport(client=client, queue=queue)
    try:
        yield transport, client, queue
    finally:
        transport.close()
        client.close()
        _drop_redis(redis_url, queue)


def test_redis_purge_leaves_no_window_for_a_slot_count(
    between: tuple[RedisTransport, BetweenRoundTrips, str], redis_url: str
) -> None:
    """A publisher fixes the slot count while the partition purge runs: the count it was told
    is in force must stay in force, so a publisher with another count is refused."""
    transport, client, queue = between
    backend = partition_backend_sync(transport)
    KeyedPublisher(transport, tier=Ordered(slots=4)).check_slots()
    backend.purge()  # once unarmed: its script is loaded, so the armed run needs no reload
    with RedisTransport(redis_url, queue=queue) as other:
        eight = KeyedPublisher(other, tier=Ordered(slots=8))
        client.run_armed(backend.purge, eight.check_slots)
        with pytest.raises(SlotCountMismatch):
            KeyedPublisher(other, tier=Ordered(slots=4)).check_slots()


def test_redis_purge_leaves_no_window_for_a_dedup_key(
    between: tuple[RedisTransport, BetweenRoundTrips, str], redis_url: str
) -> None:
    """A deduplicated publish lands while the partition purge runs (its key had expired, by
    the injected clock, but was still stored): its new window must survive the purge."""
    transport, client, queue = between
    backend = partition_backend_sync(transport)
    backend.purge()  # once unarmed: its script is loaded, so the armed run needs no reload
    clock = FakeClock()
    with RedisTransport(redis_url, queue=queue, clock=clock) as other:
        publisher = KeyedPublisher(other, tier=Ordered())
        publisher.send("x", partition_key="k", dedup_key="d", dedup_ttl=10)
        clock.advance(20)  # the window ended; the key is still stored
        sent: list[tuple[int, bool]] = []

        def racing() -> None:
            sent.append(publisher.send("x", partition_key="k", dedup_key="d", dedup_ttl=10))

        client.run_armed(backend.purge, racing)
        assert sent[0][1] is False
        assert publisher.send("x", partition_key="k", dedup_key="d", dedup_ttl=10) == (
            sent[0][0],
            True,
        )
