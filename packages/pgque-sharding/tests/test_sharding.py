"""The sharded layer's own promises (pgque.sharding), on in-memory shards.

The contract over shards is the conformance suite's (tests/conformance_memory beside this
file; tests/postgres and tests/postgres_async in ``nox -s conformance-sharded-postgres``);
these tests pin what is the layer's alone: the stable hash, id and lease routing, the rotation
of claims, merging, non-atomic batches, outages and wake-ups.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import threading
import time
from collections.abc import Iterator

import pytest

from pgque.core import (
    AsyncInMemoryTransport,
    AsyncSupportsWakeups,
    AsyncWorker,
    Capabilities,
    ConfigurationError,
    ConnectionLost,
    Event,
    InMemoryTransport,
    InvalidInput,
    Lease,
    MemoryStore,
    PartialFailure,
    PgqueError,
    RetryableConflict,
    Settlement,
    SupportsFairness,
    SupportsPurge,
    SupportsWakeups,
    TransportClosed,
    Worker,
)
from pgque.core.queue_model import QueueModel
from pgque.sharding import (
    AsyncShardedTransport,
    ShardedTransport,
    connect_sharded,
    connect_sharded_async,
    shard_for,
)


def _ev(n: object = 0) -> Event:
    return Event(kind="t", data={"n": n})


def _groups_on(shard: int, count: int, how_many: int) -> list[str]:
    """The first *how_many* group ids g0, g1, ... that live on *shard* of *count*."""
    found: list[str] = []
    i = 0
    while len(found) < how_many:
        if shard_for(f"g{i}", count) == shard:
            found.append(f"g{i}")
        i += 1
    return found


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def sharded(store: MemoryStore) -> Iterator[ShardedTransport]:
    shards = [InMemoryTransport(store=store, queue=f"q_s{k}") for k in range(3)]
    transport = ShardedTransport(shards, queue="q")
    yield transport
    transport.close()


# -- the hash ------------------------------------------------------------------------------


def test_shard_for_is_the_documented_sha256_rule() -> None:
    for key in ["", "a", "tenant:42", "é", "x" * 600]:
        digest = hashlib.sha256(key.encode("utf-8")).digest()
        for count in (1, 2, 3, 7, 64):
            assert shard_for(key, count) == int.from_bytes(digest[:8], "big") % count


def test_shard_for_is_pinned_across_versions() -> None:
    """Placement must never change: a changed hash would move every group to a new shard."""
    assert [shard_for(f"g{i}", 3) for i in range(12)] == [2, 1, 2, 0, 0, 1, 0, 2, 0, 2, 2, 0]
    assert shard_for("order-1", 1_000_003) == 715158
    assert shard_for("tenant:42", 64) == 63


def test_shard_for_spreads_groups_evenly() -> None:
    counts = [0, 0, 0]
    for i in range(3000):
        counts[shard_for(f"tenant-{i}", 3)] += 1
    assert all(900 < c < 1100 for c in counts), counts


def test_shard_for_refuses_bad_input() -> None:
    with pytest.raises(InvalidInput):
        shard_for(1, 3)  # type: ignore[arg-type]
    for bad in (0, -1, True):
        with pytest.raises(InvalidInput):
            shard_for("g", bad)


# -- construction --------------------------------------------------------------------------


def test_bad_shard_lists_are_refused(store: MemoryStore) -> None:
    one = InMemoryTransport(store=store, queue="a")
    with pytest.raises(ConfigurationError):
        ShardedTransport([])
    with pytest.raises(ConfigurationError):
        ShardedTransport([one, one])
    with pytest.raises(ConfigurationError):
        ShardedTransport([one, "not a transport"])  # type: ignore[list-item]
    other = InMemoryTransport(store=store, queue="b", max_attempts=3)
    with pytest.raises(ConfigurationError, match="max_attempts"):
        ShardedTransport([one, other])
    with pytest.raises(InvalidInput):
        ShardedTransport([one], down_retry=-1)


def test_the_logical_name_is_given_or_the_first_shards(store: MemoryStore) -> None:
    shards = [InMemoryTransport(store=store, queue=f"sub{k}") for k in range(2)]
    assert ShardedTransport(shards).queue == "sub0"
    assert ShardedTransport(shards, queue="orders").queue == "orders"


def test_capabilities_turn_the_per_shard_promises_off(sharded: ShardedTransport) -> None:
    caps = sharded.capabilities
    assert (caps.global_id_order, caps.global_fairness) == (False, False)
    assert (caps.atomic_stats, caps.atomic_batches) == (False, False)
    assert caps.dead_letters
    assert caps.scheduling
    assert caps.purge
    assert not caps.wakeups
    assert not isinstance(sharded, SupportsWakeups)
    assert isinstance(sharded, SupportsPurge)
    assert InMemoryTransport().capabilities.global_id_order  # unchanged elsewhere


# -- fairness keys: per shard ----------------------------------------------------------------


class _Unfair(InMemoryTransport):
    """An in-memory shard that declares fair shares off (as a PostgreSQL one without them)."""

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(super().capabilities, fairness=False)


def test_fairness_keys_are_offered_when_every_shard_has_them(
    sharded: ShardedTransport, store: MemoryStore
) -> None:
    caps = sharded.capabilities
    assert caps.fairness
    assert not caps.global_key_limits  # each shard applies weights, caps and rates itself
    assert isinstance(sharded, SupportsFairness)
    assert InMemoryTransport().capabilities.global_key_limits  # unchanged elsewhere
    # A shard without fair shares (a stand-in that declares it off) turns the offer off.
    plain = _Unfair(store=store, queue="plain")
    mixed = ShardedTransport([InMemoryTransport(store=store, queue="fair"), plain])
    assert not mixed.capabilities.fairness
    assert not isinstance(mixed, SupportsFairness)
    with pytest.raises(ConfigurationError, match="fairness"):
        mixed.publish("g", _ev(), fairness_key="tenant")


def test_a_key_policy_is_stored_on_every_shard(sharded: ShardedTransport) -> None:
    assert isinstance(sharded, SupportsFairness)
    stored = sharded.set_key_policy("tenant", weight=2, max_in_flight=1)
    for shard in sharded.shards:
        assert isinstance(shard, SupportsFairness)
        assert shard.key_policy("tenant") == stored
    assert sharded.key_policy("tenant") == stored
    assert sharded.delete_key_policy("tenant")
    assert all(
        isinstance(shard, SupportsFairness) and shard.key_policy("tenant") is None
        for shard in sharded.shards
    )
    assert not sharded.delete_key_policy("tenant")


def test_a_cap_holds_per_shard(sharded: ShardedTransport) -> None:
    """max_in_flight=1 over three shards: one lease of the key per shard, three in all."""
    assert isinstance(sharded, SupportsFairness)
    sharded.set_key_policy("tenant", max_in_flight=1)
    groups = [g for shard in range(3) for g in _groups_on(shard, 3, 2)]
    sharded.publish_many([(g, _ev()) for g in groups], fairness_key="tenant")
    leases = sharded.claim_many(10)
    assert sorted(sharded.shard_of(lease.group_id) for lease in leases) == [0, 1, 2]
    assert sharded.claim_many(10) == []
    for lease in leases:
        assert (sharded.group(lease.group_id) or pytest.fail("gone")).fairness_key == "tenant"
    [info] = sharded.keys()
    assert (info.key, info.in_flight, info.groups, info.messages) == ("tenant", 3, 6, 6)
    assert info.own_policy
    one = sharded.key_info("tenant") or pytest.fail("the key is not found")
    assert one.model_copy(update={"oldest_age_s": None}) == info.model_copy(
        update={"oldest_age_s": None}
    )  # the ages are read at two instants
    assert sharded.key_info("other") is None


def test_keys_pages_merge_the_shards_in_byte_order(sharded: ShardedTransport) -> None:
    assert isinstance(sharded, SupportsFairness)
    names = ["b", "a", "é", "c", "ab"]
    for i, key in enumerate(names):
        sharded.publish(f"g{i}", _ev(), fairness_key=key)
    sharded.publish("g-none", _ev())
    listed: list[str] = []
    after: str | None = None
    while page := sharded.keys(2, after=after):
        listed += [k.key for k in page]
        after = page[-1].key
    assert listed == sorted(["", *names], key=lambda k: k.encode())
    assert sum(k.messages for k in sharded.keys(100)) == 6


# -- ids and leases ------------------------------------------------------------------------


def test_ids_are_unique_and_name_their_shard(sharded: ShardedTransport) -> None:
    ids = {}
    for i in range(30):
        group = f"g{i}"
        ids[group] = sharded.publish(group, _ev(i))
    assert len(set(ids.values())) == 30
    for group, message_id in ids.items():
        assert message_id % 3 == shard_for(group, 3) == sharded.shard_of(group)
        local = message_id // 3
        inner = sharded.shards[message_id % 3].group(group)
        assert inner is not None
        assert inner.head_message_id == local
        info = sharded.group(group)
        assert info is not None
        assert info.head_message_id == message_id


def test_a_lease_routes_back_to_its_shard_from_another_transport(
    store: MemoryStore, sharded: ShardedTransport
) -> None:
    sharded.publish("g1", _ev(1))
    lease = sharded.claim()
    assert lease is not None
    assert lease.queue == "q"
    twin = ShardedTransport(
        [InMemoryTransport(store=store, queue=f"q_s{k}") for k in range(3)], queue="q"
    )
    assert twin.extend(lease, 60.0) is not None
    assert twin.ack(lease)
    assert not sharded.ack(lease)  # fenced: already acked


def test_leases_of_other_queues_are_refused(store: MemoryStore, sharded: ShardedTransport) -> None:
    sharded.publish("g1", _ev(1))
    lease = sharded.claim()
    assert lease is not None
    inner_shard = sharded.shards[lease.message_id % 3]
    other = ShardedTransport(
        [InMemoryTransport(store=store, queue=f"o_s{k}") for k in range(3)], queue="q"
    )
    for transport in (other, inner_shard):
        with pytest.raises(InvalidInput):
            transport.ack(lease)
    assert sharded.ack(lease)


# -- claims --------------------------------------------------------------------------------


def test_claims_take_the_shards_in_turn(sharded: ShardedTransport) -> None:
    for shard in range(3):
        for group in _groups_on(shard, 3, 2):
            sharded.publish(group, _ev(group))
    shards = []
    for _ in range(6):
        lease = sharded.claim()
        assert lease is not None
        shards.append(lease.message_id % 3)
    assert shards == [0, 1, 2, 0, 1, 2]


def test_claim_many_fills_from_several_shards(sharded: ShardedTransport) -> None:
    on_first = _groups_on(0, 3, 5)
    on_third = _groups_on(2, 3, 1)
    for group in on_first + on_third:
        sharded.publish(group, _ev(group))
    leases = sharded.claim_many(6)
    assert sorted(lease.group_id for lease in leases) == sorted(on_first + on_third)


def test_settle_and_claim_routes_each_settlement_and_labels_in_order(
    sharded: ShardedTransport,
) -> None:
    groups = [g for shard in range(3) for g in _groups_on(shard, 3, 2)]
    for group in groups:
        sharded.publish(group, _ev(group))
        sharded.publish(group, _ev(group + "-2"))
    first = sharded.claim_many(6)
    labels = [f"w:{i}" for i in range(6)]
    result = sharded.settle_and_claim([Settlement.ack(lease) for lease in first], 6, holder=labels)
    assert result.settled == [True] * 6
    assert sorted(lease.group_id for lease in result.leases) == sorted(groups)
    for label, lease in zip(labels, result.leases, strict=True):
        info = sharded.group(lease.group_id)
        assert info is not None
        assert info.lease_holder == label


# -- batches across shards -----------------------------------------------------------------


def test_a_batch_across_shards_is_atomic_per_shard_only(store: MemoryStore) -> None:
    """Decided and documented: not refused, not atomic across shards (atomic_batches off);
    a failure after a shard appended says so (PartialFailure), never "nothing changed"."""
    shards = [InMemoryTransport(store=store, queue=f"b_s{k}") for k in range(3)]
    sharded = ShardedTransport(shards, queue="b")
    first, last = _groups_on(0, 3, 1)[0], _groups_on(2, 3, 1)[0]
    shards[2].close()  # the last shard fails
    with pytest.raises(PartialFailure, match="shard 2") as caught:
        sharded.publish_many([(first, _ev(1)), (last, _ev(2))])
    assert caught.value.shard == 2
    assert isinstance(caught.value.error, TransportClosed)
    assert shards[0].stats().messages == 1  # what the first shard appended stays
    with pytest.raises(TransportClosed):  # nothing applied before it: its own error
        sharded.publish_many([(last, _ev(3))])


def test_a_lost_shard_after_others_appended_says_it_may_be_applied() -> None:
    """A caller that trusts ``maybe_applied=False`` retries: it must not be told that."""
    flaky = _Unreachable()
    shards = [InMemoryTransport(store=MemoryStore(), queue="p_s0"), InMemoryTransport(store=flaky)]
    sharded = ShardedTransport(shards, queue="p")
    first, last = _groups_on(0, 2, 1)[0], _groups_on(1, 2, 1)[0]
    leases_before = [sharded.publish(g, _ev(g)) for g in (first, last)]
    assert len(leases_before) == 2
    held = sharded.claim_many(2)
    assert len(held) == 2
    flaky.down = True
    with pytest.raises(ConnectionLost) as caught:
        sharded.publish_many([(first, _ev(1)), (last, _ev(2))])
    assert caught.value.maybe_applied
    assert shards[0].stats().messages == 2  # shard 0 appended
    with pytest.raises(ConnectionLost) as lost:
        sharded.ack_many(held)  # shard 0's ack goes first and stands
    assert lost.value.maybe_applied
    flaky.down = False
    assert sharded.ack_many(held) == [lease.group_id != first for lease in held]


def test_batches_over_the_limit_are_refused_before_any_shard_is_asked(
    sharded: ShardedTransport,
) -> None:
    groups = [g for shard in range(3) for g in _groups_on(shard, 3, 2)]
    items = [(groups[i % len(groups)], _ev(i)) for i in range(10_001)]
    with pytest.raises(InvalidInput, match="10000"):
        sharded.publish_many(items)
    assert sharded.stats().messages == 0
    sharded.publish(groups[0], _ev(0))
    (lease,) = sharded.claim_many(1)
    with pytest.raises(InvalidInput, match="10000"):
        sharded.ack_many([lease] * 10_001)
    with pytest.raises(InvalidInput):
        sharded.ack_many(None)  # type: ignore[arg-type]
    assert sharded.stats().in_flight == 1  # nothing was acked


def test_a_refused_claim_on_one_shard_gives_the_others_leases_back() -> None:
    conflicting = _Unreachable()
    shards = [
        InMemoryTransport(store=MemoryStore(), queue="r_s0"),
        InMemoryTransport(store=conflicting),
    ]
    sharded = ShardedTransport(shards, queue="r")
    for group in _groups_on(0, 2, 3) + _groups_on(1, 2, 3):
        sharded.publish(group, _ev(group))
    conflicting.error = RetryableConflict("deadlock detected (test store)")
    with pytest.raises(RetryableConflict):
        sharded.claim_many(4)  # shard 0 leased 2 first
    assert shards[0].stats().in_flight == 0  # given back
    assert shards[0].stats().messages == 3
    conflicting.error = None
    assert len(sharded.claim_many(6)) == 6  # nothing was left leased
    assert sharded.group(_groups_on(0, 2, 1)[0]) is not None


def test_a_refused_settlement_after_another_shard_settled_is_a_partial_failure() -> None:
    conflicting = _Unreachable()
    shards = [
        InMemoryTransport(store=MemoryStore(), queue="s_s0"),
        InMemoryTransport(store=conflicting),
    ]
    sharded = ShardedTransport(shards, queue="s")
    mine, theirs = _groups_on(0, 2, 2), _groups_on(1, 2, 2)
    for group in mine + theirs:
        sharded.publish(group, _ev(group))
        sharded.publish(group, _ev(group + "-2"))
    held = sharded.claim_many(4)
    assert len(held) == 4
    conflicting.error = RetryableConflict("deadlock detected (test store)")
    fresh = ShardedTransport(shards, queue="s")  # its claims start at shard 0
    with pytest.raises(PartialFailure) as caught:
        fresh.settle_and_claim([Settlement.ack(lease) for lease in held], 4)
    assert caught.value.shard == 1
    assert isinstance(caught.value.error, RetryableConflict)
    assert isinstance(caught.value, PgqueError)
    stats = shards[0].stats()
    assert (stats.messages, stats.in_flight) == (2, 0)  # acked; its new leases given back
    conflicting.error = None
    done = sharded.settle_and_claim([Settlement.ack(lease) for lease in held], 0)
    assert done.settled == [lease.group_id in theirs for lease in held]


def test_bad_items_publish_nothing_on_any_shard(sharded: ShardedTransport) -> None:
    with pytest.raises(InvalidInput):
        sharded.publish_many([("g1", _ev(1)), ("", _ev(2))])
    with pytest.raises(InvalidInput):
        sharded.publish_many(5)  # type: ignore[arg-type]
    assert sharded.stats().messages == 0


# -- merged views --------------------------------------------------------------------------


def test_groups_merge_in_byte_order_with_keyset_paging(sharded: ShardedTransport) -> None:
    names = ["m", "b", "z", "a", "B", "é", "0", "ab", "Z9"] + [f"k{i:02d}" for i in range(20)]
    for name in names:
        sharded.publish(name, _ev(name))
    assert {sharded.shard_of(n) for n in names} == {0, 1, 2}
    pages, after = [], None
    while True:
        page = sharded.groups(limit=4, after=after)
        if not page:
            break
        pages += [g.group_id for g in page]
        after = page[-1].group_id
    assert pages == sorted(names, key=lambda n: n.encode())


def test_stats_are_summed_and_dead_letters_merged_in_id_order(sharded: ShardedTransport) -> None:
    groups = [g for shard in range(3) for g in _groups_on(shard, 3, 2)]
    for group in groups:
        sharded.publish(group, _ev(group))
    stats = sharded.stats()
    assert (stats.groups, stats.messages) == (6, 6)
    for _ in range(6):
        lease = sharded.claim()
        assert lease is not None
        assert sharded.dead_letter(lease, "x")
    letters = sharded.dead_letters()
    ids = [d.id for d in letters]
    assert ids == sorted(ids)
    assert len(set(ids)) == 6
    assert {d.id % 3 for d in letters} == {0, 1, 2}
    assert sharded.dead_letters(2, after=ids[1]) == letters[2:4]
    assert sharded.stats().dead_letters == 6
    assert sharded.redrive([ids[0], ids[5], ids[5] + 3000]) == 2
    assert sharded.delete_dead_letters(ids[1:3]) == 2
    assert [d.id for d in sharded.dead_letters()] == ids[3:5]


def test_a_tick_goes_to_its_groups_shard_once(sharded: ShardedTransport) -> None:
    group = next(g for g in _groups_on(0, 3, 10) if shard_for("nightly", 3) != 0)
    assert sharded.publish_tick("nightly", 100.0, group, _ev(1)) is not None
    assert sharded.publish_tick("nightly", 100.0, group, _ev(2)) is None  # exactly once
    assert sharded.last_tick("nightly") == 100.0
    assert sharded.shards[0].last_tick("nightly") == 100.0
    # The tick's group is one group, where every call looks for it.
    info = sharded.group(group)
    assert info is not None
    assert info.depth == 1
    assert sharded.pause(group)
    assert sharded.claim() is None  # paused: nothing of it is claimable
    assert [g.group_id for g in sharded.groups()] == [group]
    assert sharded.resume(group)
    lease = sharded.claim()
    assert lease is not None
    assert lease.group_id == group


def test_a_tick_an_entry_published_before_its_group_moved_is_not_published_again(
    sharded: ShardedTransport,
) -> None:
    old, new = _groups_on(0, 3, 1)[0], _groups_on(1, 3, 1)[0]
    assert sharded.publish_tick("hourly", 3600.0, old, _ev(1)) is not None
    assert sharded.publish_tick("hourly", 3600.0, new, _ev(1)) is None  # shard 0 has it
    assert sharded.publish_tick("hourly", 7200.0, new, _ev(2)) is not None
    assert sharded.last_tick("hourly") == 7200.0
    assert sharded.publish_tick("hourly", 7200.0, old, _ev(2)) is None
    with pytest.raises(InvalidInput):
        sharded.publish_tick("", 1.0, old, _ev(3))
    with pytest.raises(InvalidInput):
        sharded.last_tick("")


# -- outages -------------------------------------------------------------------------------


class _Unreachable(MemoryStore):
    """A store that fails like a server nobody can reach."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        #: raised instead of answering, while set (a refusal of a reachable server)
        self.error: PgqueError | None = None

    def model(self, queue: str) -> QueueModel:
        if self.down:
            raise ConnectionLost(f"queue {queue!r} is unreachable (test store)")
        if self.error is not None:
            raise self.error
        return super().model(queue)


def test_claims_leave_a_down_shard_out_and_settling_on_it_fails_first(store: MemoryStore) -> None:
    flaky = _Unreachable()
    shards = [
        InMemoryTransport(store=store, queue="d_s0"),
        InMemoryTransport(store=flaky, queue="d_s1"),
        InMemoryTransport(store=store, queue="d_s2"),
    ]
    sharded = ShardedTransport(shards, queue="d", down_retry=60.0)
    mine = _groups_on(1, 3, 1)[0]
    others = _groups_on(0, 3, 3) + _groups_on(2, 3, 3)
    sharded.publish(mine, _ev("mine"))
    for group in others:
        sharded.publish(group, _ev(group))
    held = sharded.claim_many(1)
    first = sharded.claim_many(6)
    leases = held + first
    down_lease = next(lease for lease in leases if lease.group_id == mine)
    for lease in leases:
        if lease is not down_lease:
            assert sharded.ack(lease)
    flaky.down = True
    for group in others:
        sharded.publish(group, _ev(group + "-2"))
    # The down shard fails once, then is left out; the others keep serving.
    got = sharded.claim_many(10)
    assert sorted(lease.group_id for lease in got) == sorted(others)
    before = sharded.stats  # the down shard's stats fail: not a snapshot to trust
    with pytest.raises(ConnectionLost):
        before()
    # A call settling on the down shard fails before anything is sent to any shard.
    with pytest.raises(ConnectionLost, match="nothing was sent"):
        sharded.settle_and_claim([Settlement.ack(got[0]), Settlement.ack(down_lease)], 0)
    assert sharded.ack(got[0])  # it was not applied by the failed call
    flaky.down = False
    sharded_again = ShardedTransport(shards, queue="d")  # no memory of the outage
    assert sharded_again.ack(down_lease)


def test_an_empty_claim_while_a_shard_is_down_is_an_error_not_an_empty_queue(
    store: MemoryStore,
) -> None:
    """A worker stopping when idle must not stop while a down shard holds messages."""
    flaky = _Unreachable()
    shards = [
        InMemoryTransport(store=store, queue="e_s0"),
        InMemoryTransport(store=flaky, queue="e_s1"),
    ]
    sharded = ShardedTransport(shards, queue="e", down_retry=60.0)
    mine = _groups_on(1, 2, 1)[0]
    sharded.publish(mine, _ev("mine"))
    flaky.down = True
    for _ in range(2):  # the first call finds it down; the second is in its cool-off
        with pytest.raises(ConnectionLost):
            sharded.claim()
    flaky.down = False  # back, still in its cool-off: asked last, its message is claimed
    lease = sharded.claim()
    assert lease is not None
    assert lease.group_id == mine
    assert sharded.claim() is None  # every shard answered: truly empty


def test_all_shards_down_raises(store: MemoryStore) -> None:
    flaky = _Unreachable()
    sharded = ShardedTransport([InMemoryTransport(store=flaky, queue=f"x{k}") for k in range(2)])
    flaky.down = True
    with pytest.raises(ConnectionLost):
        sharded.claim()
    with pytest.raises(ConnectionLost):
        sharded.claim()  # left out now: still an error, not an empty queue


# -- wake-ups ------------------------------------------------------------------------------


class _WakingShard(AsyncInMemoryTransport):
    """An in-memory shard with wake-ups a test controls (the memory backend has none)."""

    CAPABILITIES = AsyncInMemoryTransport.CAPABILITIES.__class__(
        **{**AsyncInMemoryTransport.CAPABILITIES.__dict__, "wakeups": True}
    )

    def __init__(self, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.news = asyncio.Event()
        self.waiting = asyncio.Event()
        self.cancelled = 0

    async def wait_for_messages(self, timeout: float) -> bool:
        self.waiting.set()
        try:
            await asyncio.wait_for(self.news.wait(), timeout)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        except TimeoutError:
            return False
        return True


@pytest.mark.asyncio
async def test_wait_for_messages_waits_on_every_shard_at_once() -> None:
    store = MemoryStore()
    shards = [_WakingShard(store=store, queue=f"w{k}") for k in range(3)]
    sharded = AsyncShardedTransport(shards, queue="w")
    assert isinstance(sharded, AsyncSupportsWakeups)
    assert sharded.capabilities.wakeups
    waiting = asyncio.ensure_future(sharded.wait_for_messages(30.0))
    for shard in shards:  # every shard's wait is running at the same time
        await asyncio.wait_for(shard.waiting.wait(), 5.0)
    assert not waiting.done()
    shards[2].news.set()
    assert await asyncio.wait_for(waiting, 5.0) is True
    assert [s.cancelled for s in shards] == [1, 1, 0]  # the others were cancelled
    assert await sharded.wait_for_messages(0.05) is True  # shard 2 still has news
    shards[2].news.clear()
    assert await sharded.wait_for_messages(0.05) is False
    await sharded.close()


# -- connecting ----------------------------------------------------------------------------


def test_connect_sharded_opens_one_shard_per_url() -> None:
    urls = [f"memory://shardtest{k}?queue=orders_{k}" for k in range(3)]
    with connect_sharded(urls, name="orders") as sharded:
        assert isinstance(sharded, ShardedTransport)
        assert sharded.queue == "orders"
        assert [s.queue for s in sharded.shards] == ["orders_0", "orders_1", "orders_2"]
        message_id = sharded.publish("g", _ev(1))
        lease = sharded.claim()
        assert lease is not None
        assert lease.message_id == message_id
        assert sharded.ack(lease)
    with pytest.raises(ConfigurationError):
        connect_sharded([urls[0], urls[0]])
    with pytest.raises(ConfigurationError):
        connect_sharded("memory://")
    with pytest.raises(ConfigurationError):
        connect_sharded([])


@pytest.mark.asyncio
async def test_connect_sharded_async_opens_one_shard_per_url() -> None:
    sharded = connect_sharded_async(["memory://", "memory://b"], max_attempts=3)
    async with sharded:
        assert sharded.max_attempts == 3
        await sharded.publish("g", _ev(1))
        assert (await sharded.stats()).messages == 1


class _WakingSyncShard(InMemoryTransport):
    """A blocking in-memory shard with wake-ups a test controls."""

    CAPABILITIES = InMemoryTransport.CAPABILITIES.__class__(
        **{**InMemoryTransport.CAPABILITIES.__dict__, "wakeups": True}
    )

    def __init__(self, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.news = threading.Event()
        self.waiting = threading.Event()
        self.waits = 0
        self._lock = threading.Lock()

    def wait_for_messages(self, timeout: float) -> bool:
        with self._lock:
            self.waits += 1
        self.waiting.set()
        return self.news.wait(timeout)


def test_the_blocking_wait_runs_every_shard_in_a_thread_and_never_twice() -> None:
    store = MemoryStore()
    shards = [_WakingSyncShard(store=store, queue=f"t{k}") for k in range(3)]
    sharded = ShardedTransport(shards, queue="t")
    assert isinstance(sharded, SupportsWakeups)
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(sharded.wait_for_messages(30.0)))
    waiter.start()
    for shard in shards:  # every shard's wait is running at the same time
        assert shard.waiting.wait(5.0)
    shards[1].news.set()
    waiter.join(5.0)
    assert result == [True]
    # The other two waits still run (a blocking wait cannot be cancelled): the next call
    # counts them instead of starting a second wait on those shards.
    shards[1].news.clear()
    shards[0].news.set()
    assert sharded.wait_for_messages(5.0) is True
    assert [s.waits for s in shards] == [1, 2, 1]
    shards[0].news.clear()
    for shard in shards:  # end the waits still running
        shard.news.set()
    sharded.close()


@pytest.mark.asyncio
async def test_an_async_worker_drains_a_sharded_queue_in_group_order() -> None:
    store = MemoryStore()
    shards = [AsyncInMemoryTransport(store=store, queue=f"aw{k}") for k in range(3)]
    sharded = AsyncShardedTransport(shards, queue="aw")
    groups = [f"g{i}" for i in range(12)]
    for n in range(5):
        await sharded.publish_many([(g, _ev(n)) for g in groups])
    seen: list[tuple[str, object]] = []

    async def handle(event: Event, lease: Lease) -> None:
        assert isinstance(event.data, dict)
        seen.append((lease.group_id, event.data["n"]))

    worker = AsyncWorker(sharded, handle, concurrency=4, idle_backoff=(0.01, 0.05))
    report = await asyncio.wait_for(
        worker.run(stop_when_idle=True, install_signal_handlers=False), 30.0
    )
    assert report.acked == 60
    for g in groups:
        assert [n for group, n in seen if group == g] == [0, 1, 2, 3, 4]
    assert (await sharded.stats()).messages == 0
    await sharded.close()


def test_a_down_shard_holding_a_settlement_does_not_stall_the_other_shards() -> None:
    """The worker's pending ack for a down shard must not hold back the acks and claims of the
    shards that answer: they go on at once, not when that lease ends (visibility 60 s)."""
    flaky = _Unreachable()
    shards = [
        InMemoryTransport(store=MemoryStore(), queue="st_s0"),
        InMemoryTransport(store=flaky, queue="st_s1"),
    ]
    sharded = ShardedTransport(shards, queue="st")
    mine = _groups_on(1, 2, 1)[0]
    others = _groups_on(0, 2, 6)
    sharded.publish(mine, _ev("mine"))
    started, gate = threading.Event(), threading.Event()
    handled: list[str] = []

    def handle(event: Event, lease: Lease) -> None:
        if lease.group_id == mine:
            started.set()
            assert gate.wait(30)
        handled.append(lease.group_id)

    worker = Worker(sharded, handle, concurrency=2, visibility=60.0, idle_backoff=(0.01, 0.05))
    runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    runner.start()
    try:
        assert started.wait(10)
        flaky.down = True
        gate.set()  # its ack now goes to a shard that is down
        for group in others:
            for n in range(3):
                sharded.publish(group, _ev(n))
        deadline = time.monotonic() + 15.0
        while shards[0].stats().messages and time.monotonic() < deadline:
            time.sleep(0.05)
        assert shards[0].stats().messages == 0  # acked while shard 1 is still down
        assert sorted(handled).count(others[0]) == 3
        flaky.down = False
        deadline = time.monotonic() + 15.0
        while flaky.down is False and sharded.stats().messages and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sharded.stats().messages == 0  # the held ack went through once it was back
    finally:
        gate.set()
        worker.stop()
        runner.join(30)
    assert not runner.is_alive()
    assert handled.count(mine) == 1
