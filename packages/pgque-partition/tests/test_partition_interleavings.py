"""PLACEHOLDER"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from _partition_support import Make
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


def _take(backend: Any, key: str, ttl: float, deadline: float) -> tuple[Any, Any]:
    """Enter *key*'s lock, trying again until it is granted; return (context manager, grant)."""
    while True:
        lock = backend.key_lock(key, ttl)
        grant = lock.__enter__()
        if grant is not None:
            return lock, grant
        lock.__exit__(None, None, None)
        assert time.monotonic() < deadline, "the lock was never granted"
        time.sleep(0.005)


@pytest.mark.parametrize("backend", ["memory", "redis"], indirect=True)
def test_a_holder_past_its_ttl_cannot_free_the_next_holder(make_transport: Make) -> None:
    """Tier A on Redis and in memory: a holder whose handler outlived lock_ttl has lost the key
    to a second holder with a larger epoch; its late unlock must not free the second's lock."""
    backend = partition_backend_sync(make_transport())
    key = fresh_queue()  # lock keys span queues: one no other test takes
    deadline = time.monotonic() + 10
    first_lock, first = _take(backend, key, 0.05, deadline)
    second_lock, second = _take(backend, key, 30.0, deadline)  # granted once the TTL ran out
    assert second.epoch > first.epoch
    first_lock.__exit__(None, None, None)  # the late holder's unlock: its token is stale
    with backend.key_lock(key, 30.0) as third:
        assert third is None  # still the second holder's
    second_lock.__exit__(None, None, None)
    with backend.key_lock(key, 30.0) as fourth:
        assert fourth is not None
        assert fourth.epoch > second.epoch


@pytest.mark.parametrize("backend", ["memory", "redis"], indirect=True)
def test_a_key_is_held_by_one_holder_at_a_time(make_transport: Make) -> None:
    """Two threads race for one key while the first holder waits inside its critical section:
    the second is refused (None) until the first leaves."""
    backend = partition_backend_sync(make_transport())
    key = fresh_queue()
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with backend.key_lock(key, 30.0) as grant:
            assert grant is not None
            inside.set()
            assert leave.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(30)
        with backend.key_lock(key, 30.0) as grant:
            assert grant is None
        with backend.key_lock(key + "-other", 30.0) as grant:
            assert grant is not None  # other keys are free
    finally:
        leave.set()
        holder.join(30)
    with backend.key_lock(key, 30.0) as grant:
        assert grant is not None


class FailingUnlock(redis.Redis):
    """A real redis-py client whose connection drops when it sends the key-unlock script
    (after the handler ran): the lock stays until its TTL."""

    unlock_sha = ""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if args[:2] == ("EVALSHA", self.unlock_sha):
            raise redis.ConnectionError("Connection reset by peer (injected into unlock)")
        return super().execute_command(*args, **options)


def test_a_lost_unlock_does_not_fail_a_handler_that_ran(redis_url: str) -> None:
    """The handler finished; only the unlock's reply was lost. Failing the call would make the
    worker retry, running the finished handler again. The lock ends with its TTL instead."""
    from pgque.partition._resources import lua_script

    queue = fresh_queue()
    client = FailingUnlock.from_url(redis_url)
    client.unlock_sha = lua_script("unlock").sha
    transport = RedisTransport(client=client, queue=queue)
    try:
        backend = partition_backend_sync(transport)
        ran = []
        with backend.key_lock(queue, 0.2) as grant:
            assert grant is not None
            ran.append(grant.epoch)
        assert len(ran) == 1
        with backend.key_lock(queue, 30.0) as grant:
            assert grant is None  # still locked: the unlock never happened
        deadline = time.monotonic() + 10
        lock, grant = _take(backend, queue, 30.0, deadline)  # free again once the TTL ran out
        lock.__exit__(None, None, None)
    finally:
        transport.close()
        client.close()
        _drop_redis(redis_url, queue)
