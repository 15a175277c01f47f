"""The producer dedup window: N tenants, 4 producers x 3 attempts each. With dedup exactly N
messages are appended and N handler runs happen; without it, every send appends.

CI size: 200 tenants; ``--partition-full``: the issue's 1,000 (12,000 sends).
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
import redis
from _partition_support import Make

from pgque.conformance.clock import FakeClock
from pgque.core import InvalidInput
from pgque.core.memory import MemoryPartitionAdapter
from pgque.partition import Exclusive, KeyedPublisher, Ordered, PartitionConsumer, partition_backend
from pgque.redis import key_prefix

PRODUCERS = 4
ATTEMPTS = 3
#: Expired dedup keys reaped per deduplicated publish, on every backend (docs/partition.md).
REAP_BATCH = 16


def _produce(publisher: KeyedPublisher, tenants: int, dedup: bool) -> list[tuple[int, bool]]:
    results: list[tuple[int, bool]] = []
    lock = threading.Lock()

    def producer() -> None:
        mine = []
        for tenant in range(tenants):
            for _attempt in range(ATTEMPTS):
                mine.append(
                    publisher.send(
                        "Migrate",
                        {"tenant": tenant},
                        partition_key=f"tenant:{tenant}",
                        dedup_key=f"migrate:tenant:{tenant}:v3" if dedup else None,
                        dedup_ttl=600 if dedup else None,
                    )
                )
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=producer) for _ in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    return results


def test_dedup_on_appends_each_effect_once(
    transport_factory: Make, backend: str, full: bool
) -> None:
    tenants = 1000 if full else 200
    transport = transport_factory()
    results = _produce(KeyedPublisher(transport, tier=Exclusive()), tenants, dedup=True)
    assert len(results) == tenants * PRODUCERS * ATTEMPTS
    appended = [mid for mid, deduped in results if not deduped]
    assert len(appended) == tenants
    # Every repeat returned the id of the one append of its key.
    assert {mid for mid, _ in results} == set(appended)
    assert transport.stats().messages == tenants
    runs: list[object] = []
    consumer = PartitionConsumer(
        transport, lambda e: runs.append(e.data), tier=Exclusive(), concurrency=4
    )
    consumer.run(stop_when_idle=True)
    assert len(runs) == tenants
    print(f"\n[dedup] backend={backend}: {len(results)} sends, {len(appended)} appended")


def test_dedup_off_appends_every_send(transport_factory: Make, backend: str, full: bool) -> None:
    tenants = 1000 if full else 200
    transport = transport_factory()
    results = _produce(KeyedPublisher(transport, tier=Exclusive()), tenants, dedup=False)
    assert not any(deduped for _, deduped in results)
    assert transport.stats().messages == tenants * PRODUCERS * ATTEMPTS
    print(f"\n[dedup off] backend={backend}: {len(results)} sends, {len(results)} appended")


def test_a_deduplicated_send_honours_max_event_bytes(transport_factory: Make) -> None:
    """Every adapter's dedup publish gets the event as text within the transport's limit."""
    transport = transport_factory(max_event_bytes=1024)
    publisher = KeyedPublisher(transport, tier=Ordered())
    with pytest.raises(InvalidInput, match="max_event_bytes"):
        publisher.send("x", {"pad": "p" * 2000}, partition_key="k", dedup_key="d", dedup_ttl=10)
    assert transport.stats().messages == 0
    _, deduped = publisher.send("x", {"pad": "p"}, partition_key="k", dedup_key="d", dedup_ttl=10)
    assert not deduped  # the refused send opened no window


def test_the_window_ends_and_expired_keys_are_reaped_in_batches(
    transport_factory: Make, backend: str, request: pytest.FixtureRequest
) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    publisher = KeyedPublisher(transport, tier=Ordered())
    first, deduped = publisher.send("x", partition_key="k", dedup_key="e1", dedup_ttl=10)
    assert not deduped
    clock.advance(9.5)
    assert publisher.send("x", partition_key="k", dedup_key="e1", dedup_ttl=10) == (first, True)
    clock.advance(1.0)  # the window is measured from the first send, not extended by repeats
    again, deduped = publisher.send("x", partition_key="k", dedup_key="e1", dedup_ttl=10)
    assert not deduped
    assert again > first
    for i in range(3 * REAP_BATCH):
        publisher.send("x", partition_key="k", dedup_key=f"old{i}", dedup_ttl=1)
    clock.advance(5)
    # A key above the expired ones in byte order: inside a transaction (Tier A's), PostgreSQL
    # reaps only keys below the publish's own (docs/postgres.md, lock order).
    publisher.send("x", partition_key="k", dedup_key="zz-new", dedup_ttl=100)
    # One publish reaped one batch of the expired keys, no more: e1, "zz-new" and the rest.
    expected = 3 * REAP_BATCH - REAP_BATCH + 2
    if backend == "memory":
        adapter = partition_backend(transport)
        assert isinstance(adapter, MemoryPartitionAdapter)
        assert len(adapter.state.dedup[transport.queue].keys) == expected
    elif backend == "redis":
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
        try:
            prefix = key_prefix(transport.queue).replace("[", "\\[")
            assert len(list(client.scan_iter(match=prefix + "dd:*"))) == expected
            assert client.zcard(key_prefix(transport.queue) + "dd") == expected
        finally:
            client.close()
    else:
        url = request.getfixturevalue("postgres_url")
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pgque_fifo.dedup_keys WHERE queue = %s", (transport.queue,)
            ).fetchone()
        assert row == (expected,)


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_redis_dedup_keys_expire_with_their_window(transport_factory: Make) -> None:
    transport = transport_factory()
    publisher = KeyedPublisher(transport, tier=Ordered())
    first, _ = publisher.send("x", partition_key="k", dedup_key="e1", dedup_ttl=0.2)
    assert publisher.send("x", partition_key="k", dedup_key="e1", dedup_ttl=0.2) == (first, True)
    time.sleep(0.3)
    assert publisher.send("x", partition_key="k", dedup_key="e1", dedup_ttl=0.2)[1] is False


def test_the_window_follows_the_injected_clock_on_every_backend(transport_factory: Make) -> None:
    """Memory, PostgreSQL and Redis agree under an injected clock: the window is measured on
    it, not on the server's clock (no real time passes here)."""
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    publisher = KeyedPublisher(transport, tier=Ordered())
    first, deduped = publisher.send("x", partition_key="k", dedup_key="w", dedup_ttl=10)
    assert not deduped
    clock.advance(9.999)
    assert publisher.send("x", partition_key="k", dedup_key="w", dedup_ttl=10) == (first, True)
    clock.advance(0.002)  # past the window on the injected clock, microseconds in real time
    second, deduped = publisher.send("x", partition_key="k", dedup_key="w", dedup_ttl=10)
    assert not deduped
    assert second > first
    # The new publish opened a new window, on the same clock.
    clock.advance(5)
    assert publisher.send("x", partition_key="k", dedup_key="w", dedup_ttl=10) == (second, True)
    assert transport.stats().messages == 2


@pytest.mark.parametrize("value", ["{id}", "{id}|{end}"], ids=["no-window-end", "not-indexed"])
@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_a_purge_forgets_dedup_keys_written_before_the_index(
    transport_factory: Make, request: pytest.FixtureRequest, value: str
) -> None:
    """Dedup values written by earlier versions (no window end, or not in the ``dd`` index)
    must not survive a purge: a repeat send in their window must publish again rather than
    dedup to a purged message id."""
    transport = transport_factory()
    publisher = KeyedPublisher(transport, tier=Ordered())
    first, _ = publisher.send("x", partition_key="k")
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    try:
        end = repr(time.time() + 600)
        key = key_prefix(transport.queue) + "dd:legacy"
        client.set(key, value.format(id=first, end=end), px=600_000)
        assert publisher.send("x", partition_key="k", dedup_key="legacy") == (first, True)
        transport.purge()  # type: ignore[attr-defined]
        publisher.backend.purge()
        again, deduped = publisher.send("x", partition_key="k", dedup_key="legacy")
        assert not deduped
        assert again > first
        # The new window works as any other.
        assert publisher.send("x", partition_key="k", dedup_key="legacy") == (again, True)
    finally:
        client.close()
