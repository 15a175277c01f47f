"""stats() reads counts, it does not walk the queue (lua/stats.lua): every count is a
cardinality or a count of a score range of an index the state-changing scripts keep, so its cost
does not grow with the leased or parked groups (issue 33: constant-time stats at 1M groups)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from pgque.core import Event, Lease
from pgque.redis import RedisTransport, key_prefix


def _fill(transport: RedisTransport, groups: int, *, leased: int, parked: int) -> list[str]:
    """Publish one message to each of *groups* groups, lease *leased* of them for an hour, and
    park *parked* of those for an hour; return the leased groups."""
    batch = 1000
    for start in range(0, groups, batch):
        transport.publish_many(
            [(f"g{n}", Event(kind="job")) for n in range(start, min(groups, start + batch))]
        )
    leases: list[Lease] = []
    while len(leases) < leased:
        got = transport.claim_many(min(batch, leased - len(leases)), 3600.0)
        assert got
        leases.extend(got)
    for lease in leases[:parked]:
        assert transport.nack(lease, delay=3600.0)
    return [lease.group_id for lease in leases]


def _fastest_stats(transport: RedisTransport, rounds: int = 15) -> float:
    """The fastest of *rounds* stats() calls, in seconds (the least disturbed by other load)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        transport.stats()
        best = min(best, time.perf_counter() - start)
    return best


def test_stats_does_not_read_the_hash_of_each_leased_or_parked_group(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """A script that reads a key sets its access time: after stats, the hashes of the leased
    and parked groups must still be as idle as before (Redis keeps idle time in seconds)."""
    transport = transport_factory()
    held = _fill(transport, 200, leased=100, parked=50)
    stats = transport.stats()
    assert (stats.groups, stats.in_flight, stats.parked) == (200, 50, 50)
    time.sleep(2.2)
    transport.stats()
    p = key_prefix(transport.queue)
    idle = [raw_client.object("idletime", f"{p}g:{gid}") for gid in held]
    assert min(idle) >= 2, "stats read the hashes of leased or parked groups"


def test_stats_costs_the_same_at_100_and_20000_leased_groups(
    transport_factory: Callable[..., RedisTransport],
) -> None:
    """The fastest stats() of a queue with 20,000 leased and parked groups is within a few times
    that of a queue with 100 (walking them costs tens of times more)."""
    small = transport_factory()
    _fill(small, 100, leased=100, parked=10)
    large = transport_factory()
    _fill(large, 20_000, leased=20_000, parked=10)
    assert large.stats().in_flight == 19_990
    small_s, large_s = _fastest_stats(small), _fastest_stats(large)
    assert large_s < 4 * small_s + 0.001, (small_s, large_s)
