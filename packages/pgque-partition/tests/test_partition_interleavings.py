"""The pairwise interleaving review of the partition layer on Redis and memory (issue 11):
where one of its operations is NOT a single atomic step, what another client can do between
its steps, and the test that covers it; then the pairs of single-step operations.

The harness: :class:`BetweenRoundTrips`, a real redis-py client that runs "the other client"
before the second round trip of an operation (or after it, when the operation is one round
trip, leaving no room), and threads holding a key's lock inside their critical section on an
event while another tries to enter. PostgreSQL's own functions are reviewed with their SQL.

In memory every transport operation and every partition step (dedup publish, slot count,
purge) takes the store's lock once and reads the clock inside it, so, as on Redis, two of them
never interleave; only the key lock of Tier A spans the handler.

Multi-step paths:

- Tier A (Redis, memory): lock (one script / one critical section), the handler, unlock (one
  script)
  between: the lock's TTL runs out while the handler runs: a second holder gets the key, with a
    larger epoch (pass ctx.epoch to a store that refuses older ones); the late holder's unlock
    carries a stale token and frees nothing
  covered by: test_a_holder_past_its_ttl_cannot_free_the_next_holder;
    test_a_key_is_held_by_one_holder_at_a_time; test_partition_tier_a.py
- Tier A (Redis): the unlock's reply is lost after the handler ran
  between: the call failed, so the worker retried the event and ran the finished handler again
    -- FIXED: logged, the lock ends with its TTL
  covered by: test_a_lost_unlock_does_not_fail_a_handler_that_ran (in pgque-redis's
    test_redis_partition.py, beside the adapter's code)
- Tier A (PostgreSQL): the lock transaction on a connection the transport shares
  between: on ONE injected connection a second slot's lock transaction was a savepoint of the
    first and the advisory lock re-entrant: two holders -- FIXED: refused at construction
    (concurrency > 1 without lock_pool; a second Exclusive consumer on that connection; a
    lock_pool smaller than the concurrency) and when a second lock transaction begins on a
    connection that carries one; that refusal stops the worker (StopWorker: the message is
    released, not retried until dead-lettered)
  covered by: test_partition_tier_a_session.py
- Tier A: unlock, then the worker's ack of the event
  between: another worker may take the key and run ANOTHER event of it in between (allowed:
    exclusion, not order); the same event runs again only if its lease expired (at least once)
  covered by: test_partition_tier_a.py::test_tier_a_under_heavy_contention (no overlap, work
    done once per key)
- Tier A ``drop``: a held key is seen, then the event is acked unrun
  between: the holder may already be past the point where it reads the state the dropped event
    asks for: drop is only for idempotent "ensure state" handlers (documented); ``defer`` runs
    it later
  covered by: by design (docs/partition.md); test_tier_a_defer_retries_a_held_key
- partition purge (Redis): was SCAN, then DEL of what it found
  between: a slot-count write or a deduplicated publish landing between them was deleted: the
    count a publisher had been told was in force, or a fresh window -- FIXED: one script
  covered by: test_redis_purge_leaves_no_window_for_a_slot_count;
    test_redis_purge_leaves_no_window_for_a_dedup_key
- partition purge (Redis) x dedup keys written before the ``dd`` index (found by no index)
  between: such a key survived the purge, and a repeat send in its window deduplicated to a
    purged id -- FIXED: the purge records the last message id issued (``ddfloor``); a window
    naming an id at or below it counts as purged
  covered by: test_partition_dedup.py::test_a_purge_forgets_dedup_keys_written_before_the_index
- the transport's purge and the partition purge: two calls by the caller (every backend)
  between: a deduplicated publish between them keeps its message but loses its key (partition
    purge after), or keeps a key whose message was purged (partition purge first). Left open:
    purge both at a quiet time
  covered by: not covered (documented here)
- a publisher's (or consumer's) slot count: checked once, then cached
  between: reset_slots (one script: refuses a queue with messages) and a new count by another
    publisher, while an old publisher lives: the old one keeps publishing under its count, so
    one key lands in two groups. Left open (an atomic check needs the PostgreSQL function too):
    stop every old publisher and consumer before reset_slots
  covered by: not covered (documented here and in docs/partition.md)

Single steps (one Lua script, or one critical section under the memory store's lock):

- dedup publish x dedup publish of one key
  could happen: the check and the append are one script (memory: one critical section): one
    append, the repeat gets its id
  covered by: test_partition_dedup.py::test_dedup_on_appends_each_effect_once
- dedup publish x the end of its window
  could happen: judged on the script's time: the server's, or the injected clock (Redis stored
    only a server-side PX -- FIXED)
  covered by:
    test_partition_dedup.py::test_the_window_follows_the_injected_clock_on_every_backend
- ensure_slots x ensure_slots with another count
  could happen: SET NX and GET in one script: the first count wins, the second is refused
  covered by: test_partition_routing.py::test_a_different_slot_count_is_refused
- reset_slots x publish
  could happen: the message count check and the DEL are one script: a reset after the publish is
    refused
  covered by: test_partition_routing.py (reset) and the note above on cached counts
- Tier A lock x lock of one key
  could happen: SET NX PX (memory: under a mutex): one holder
  covered by: test_a_key_is_held_by_one_holder_at_a_time
- Tier B (Ordered) and the pause policy
  could happen: plain groups and the transport's own operations: the transport's pair table
    applies (pgque-redis test_interleavings.py); release_key is one unblock
  covered by: test_partition_tier_b.py; test_partition_policies.py
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
import redis
from _partition_support import Make, _drop_redis, fresh_queue

from pgque.conformance.clock import FakeClock
from pgque.partition import KeyedPublisher, Ordered, SlotCountMismatch, partition_backend
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
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

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
    client = cast(BetweenRoundTrips, BetweenRoundTrips.from_url(redis_url))
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
    backend = partition_backend(transport)
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
    backend = partition_backend(transport)
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
def test_a_holder_past_its_ttl_cannot_free_the_next_holder(transport_factory: Make) -> None:
    """Tier A on Redis and in memory: a holder whose handler outlived lock_ttl has lost the key
    to a second holder with a larger epoch; its late unlock must not free the second's lock."""
    backend = partition_backend(transport_factory())
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
def test_a_key_is_held_by_one_holder_at_a_time(transport_factory: Make) -> None:
    """Two threads race for one key while the first holder waits inside its critical section:
    the second is refused (None) until the first leaves."""
    backend = partition_backend(transport_factory())
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
