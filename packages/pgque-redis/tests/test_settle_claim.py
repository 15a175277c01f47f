"""settle_and_claim on Redis: one script settles finished leases (each fenced on its own, with
exactly the data its ack/nack/release/dead_letter stores) and then claims like claim_many."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis

from pgque.conformance.clock import FakeClock
from pgque.core import ErrorInfo, Event, InvalidInput, Settlement
from pgque.core.models import Lease
from pgque.redis import AsyncRedisTransport, RedisTransport

Factory = Callable[..., RedisTransport]


def _claim(transport: RedisTransport, visibility: float = 30.0) -> Lease:
    lease = transport.claim(visibility)
    assert lease is not None
    return lease


def test_acks_then_claims_the_next_heads_in_one_call(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock())
    for group in ("a", "b"):
        transport.publish(group, Event(kind=f"{group}1"))
        transport.publish(group, Event(kind=f"{group}2"))
    first = transport.claim_many(2)
    result = transport.settle_and_claim([Settlement.ack(lease) for lease in first], 5)
    assert result.settled == [True, True]
    assert sorted(lease.event.kind for lease in result.leases) == ["a2", "b2"]
    assert all(lease.attempt == 1 for lease in result.leases)
    stats = transport.stats()
    assert (stats.messages, stats.in_flight) == (2, 2)


def test_a_stale_token_is_fenced_and_the_valid_one_applies(transport_factory: Factory) -> None:
    """Atomic but per-settlement: a settlement whose lease is gone fails alone; the valid one
    beside it applies and the claim still happens."""
    transport = transport_factory(clock=FakeClock())
    transport.publish("a", Event(kind="a1"))
    transport.publish("b", Event(kind="b1"))
    transport.publish("c", Event(kind="c1"))
    a, b = transport.claim_many(2)
    stale = a.model_copy(update={"token": "not-the-token"})
    result = transport.settle_and_claim([Settlement.ack(stale), Settlement.ack(b)], 5)
    assert result.settled == [False, True]
    # a stays leased (its real lease is untouched), b's group is drained, c is claimed.
    assert [lease.group_id for lease in result.leases] == ["c"]
    assert transport.ack(a)
    assert transport.stats().messages == 1


def test_an_expired_and_reclaimed_lease_is_fenced(transport_factory: Factory) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="k"))
    old = _claim(transport, 1)
    clock.advance(2)
    new = _claim(transport, 30)
    assert new.attempt == 2
    for settlement in (
        Settlement.ack(old),
        Settlement.nack(old, delay=5, error="late"),
        Settlement.release(old),
        Settlement.dead_letter(old, "late"),
    ):
        result = transport.settle_and_claim([settlement], 1)
        assert result.settled == [False]
        assert result.leases == []  # the group is leased by the new holder
    info = transport.group("g")
    assert info is not None
    assert (info.state, info.head_attempts, info.last_error) == ("leased", 2, None)
    assert transport.dead_letters() == []
    assert transport.ack(new)


def test_claims_distinct_groups_never_two_of_one(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock())
    for i in range(3):
        for group in ("a", "b", "c"):
            transport.publish(group, Event(kind=f"{group}{i}"))
    first = transport.claim_many(3)
    # visibility 0: a freed group is claimable at once, still one lease per group per call.
    result = transport.settle_and_claim([Settlement.ack(x) for x in first], 10, visibility=0)
    assert result.settled == [True, True, True]
    assert sorted(lease.group_id for lease in result.leases) == ["a", "b", "c"]
    assert sorted(lease.event.kind for lease in result.leases) == ["a1", "b1", "c1"]


def test_n_zero_settles_only(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("a", Event(kind="a"))
    transport.publish("b", Event(kind="b"))
    a = _claim(transport)
    result = transport.settle_and_claim([Settlement.ack(a)], 0)
    assert (result.settled, result.leases) == ([True], [])
    stats = transport.stats()
    assert (stats.messages, stats.in_flight) == (1, 0)  # b was not claimed


def test_no_settlements_claims_only(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("a", Event(kind="a"))
    transport.publish("b", Event(kind="b"))
    result = transport.settle_and_claim([], 1, holder="w1", min_priority=0)
    assert result.settled == []
    (lease,) = result.leases
    assert lease.group_id == "a"
    info = transport.group("a")
    assert info is not None
    assert info.lease_holder == "w1"
    assert transport.settle_and_claim([], 0).leases == []


def test_nack_records_the_error_and_parks(transport_factory: Factory) -> None:
    clock = FakeClock()
    transport = transport_factory(clock=clock)
    transport.publish("g", Event(kind="k"))
    lease = _claim(transport)
    result = transport.settle_and_claim(
        [Settlement.nack(lease, delay=10, error=ValueError("bad sku"))], 5
    )
    assert (result.settled, result.leases) == ([True], [])  # parked: not claimable
    info = transport.group("g")
    assert info is not None
    assert info.last_error is not None
    assert (info.state, info.head_attempts) == ("parked", 1)
    assert info.resume_at == clock() + 10
    assert (info.last_error.type, info.last_error.message) == ("ValueError", "bad sku")
    assert info.last_error.at == clock()  # timed by the script's clock, as nack does
    clock.advance(10)
    again = transport.settle_and_claim([], 1).leases
    assert [(x.message_id, x.attempt) for x in again] == [(lease.message_id, 2)]


def test_nack_without_delay_is_claimed_again_in_the_same_call(
    transport_factory: Factory,
) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("g", Event(kind="k"))
    lease = _claim(transport)
    result = transport.settle_and_claim([Settlement.nack(lease)], 1)
    assert result.settled == [True]
    assert [(x.message_id, x.attempt) for x in result.leases] == [(lease.message_id, 2)]


def test_dead_letter_keeps_the_given_error_else_the_stored_one(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("a", Event(kind="a"))
    transport.publish("b", Event(kind="b"))
    a, b = transport.claim_many(2)
    own = ErrorInfo(type="Own", message="kept", at=123.5)
    assert transport.nack(b, error="stored")
    b = _claim(transport)
    result = transport.settle_and_claim(
        [Settlement.dead_letter(a, "poison", error=own), Settlement.dead_letter(b, "gave up")], 1
    )
    assert (result.settled, result.leases) == ([True, True], [])
    letters = {letter.group_id: letter for letter in transport.dead_letters()}
    assert letters["a"].reason == "poison"
    assert letters["a"].error == own  # an ErrorInfo given whole keeps its own time
    assert letters["b"].reason == "gave up"
    assert letters["b"].error is not None
    assert letters["b"].error.message == "stored"
    assert letters["b"].attempts == 2
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.dead_letters) == (0, 0, 2)


def test_settled_data_matches_the_single_operations(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    """The keys each settlement leaves are those its own operation leaves."""
    fused, single = (transport_factory(clock=FakeClock()) for _ in range(2))

    def run(transport: RedisTransport, apply: Callable[[list[Lease]], None]) -> dict[str, Any]:
        for group in ("a", "b", "c", "d"):
            transport.publish(group, Event(id=group, kind="k", created_at=_FIXED))
            transport.publish(group, Event(id=group + "2", kind="k", created_at=_FIXED))
        leases = sorted(transport.claim_many(4), key=lambda x: x.group_id)
        apply(leases)
        return _dump(raw_client, transport.key_prefix)

    def settle_fused(leases: list[Lease]) -> None:
        a, b, c, d = leases
        result = fused.settle_and_claim(
            [
                Settlement.ack(a),
                Settlement.nack(b, delay=3, error=KeyError("x")),
                Settlement.release(c),
                Settlement.dead_letter(d, "poison", error="boom"),
            ],
            0,
        )
        assert result.settled == [True] * 4

    def settle_single(leases: list[Lease]) -> None:
        a, b, c, d = leases
        assert single.ack(a)
        assert single.nack(b, delay=3, error=KeyError("x"))
        assert single.release(c)
        assert single.dead_letter(d, "poison", error="boom")

    assert run(fused, settle_fused) == run(single, settle_single)


def test_release_does_not_count_the_attempt(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock(), max_attempts=1)
    transport.publish("g", Event(kind="k"))
    lease = _claim(transport)
    # With max_attempts=1 a counted delivery would exhaust the head; a release gives it back.
    result = transport.settle_and_claim([Settlement.release(lease)], 1)
    assert result.settled == [True]
    (again,) = result.leases
    assert (again.message_id, again.attempt) == (lease.message_id, 1)
    assert transport.dead_letters() == []


def test_max_attempts_applies_to_the_claim(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock(), max_attempts=1)
    transport.publish("g", Event(kind="k"))
    transport.publish("h", Event(kind="h"))
    lease = _claim(transport)
    result = transport.settle_and_claim([Settlement.nack(lease)], 2)
    assert result.settled == [True]
    assert [x.group_id for x in result.leases] == ["h"]
    (letter,) = transport.dead_letters()
    assert (letter.group_id, letter.reason) == ("g", "max_attempts (1) exhausted")


def test_on_exhausted_block_applies_to_the_claim(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock(), max_attempts=1, on_exhausted="block")
    transport.publish("g", Event(kind="k"))
    lease = _claim(transport)
    result = transport.settle_and_claim([Settlement.nack(lease)], 1)
    assert (result.settled, result.leases) == ([True], [])
    info = transport.group("g")
    assert info is not None
    assert info.state == "blocked"


def test_paused_groups_and_min_priority_are_respected(transport_factory: Factory) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("low", Event(kind="k"))
    transport.publish("high", Event(kind="k"), priority=3)
    transport.publish("held", Event(kind="k"), priority=4)
    assert transport.pause("held")
    result = transport.settle_and_claim([], 5, min_priority=2)
    assert [x.group_id for x in result.leases] == ["high"]


def test_an_undecodable_head_is_dead_lettered_as_claim_many_does(
    transport_factory: Factory, raw_client: redis.Redis
) -> None:
    transport = transport_factory(clock=FakeClock())
    ids = {g: transport.publish(g, Event(kind=g)) for g in ("a", "b", "c", "d")}
    raw_client.hset(transport.key_prefix + "msg", str(ids["b"]), b"{not json")  # in the script
    raw_client.hset(transport.key_prefix + "msg", str(ids["c"]), b'{"kind": ""}')  # the client
    transport.publish("b", Event(kind="b2"))
    transport.publish("c", Event(kind="c2"))
    a = _claim(transport)
    result = transport.settle_and_claim([Settlement.ack(a)], 3)
    assert result.settled == [True]
    # c's head is dead-lettered through its lease; as in claim_many, c is not claimed again.
    assert sorted(x.event.kind for x in result.leases) == ["b2", "d"]
    letters = transport.dead_letters()
    assert sorted(letter.group_id for letter in letters) == ["b", "c"]
    assert all(letter.reason.startswith("undecodable event: ") for letter in letters)


def test_everything_is_checked_before_any_io(transport_factory: Factory) -> None:
    transport = transport_factory()
    other = transport_factory()
    transport.publish("g", Event(kind="k"))
    lease = _claim(transport)
    other.publish("g", Event(kind="k"))
    foreign = _claim(other)
    bad: list[tuple[list[Any], dict[str, Any]]] = [
        ([Settlement.ack(foreign)], {}),
        (["ack"], {}),
        ([Settlement.nack(lease, delay=-1)], {}),
        ([Settlement.nack(lease, error=ErrorInfo(type="T", message="m", at=float("nan")))], {}),
        ([Settlement.ack(lease)], {"n": -1}),
        ([Settlement.ack(lease)], {"n": 10_001}),
        ([Settlement.ack(lease)], {"visibility": -1}),
        ([Settlement.ack(lease)], {"min_priority": 5}),
        ([Settlement.ack(lease)], {"holder": 7}),
    ]
    for settlements, options in bad:
        n = options.pop("n", 1)
        with pytest.raises(InvalidInput):
            transport.settle_and_claim(settlements, n, **options)
    # Nothing was applied: the lease is still held.
    assert transport.ack(lease)


def test_one_wake_for_a_release(transport_factory: Factory, raw_client: redis.Redis) -> None:
    transport = transport_factory(clock=FakeClock())
    transport.publish("g", Event(kind="k"))
    lease = _claim(transport)
    pubsub = raw_client.pubsub(ignore_subscribe_messages=True)
    try:
        pubsub.subscribe(transport.key_prefix + "wake")
        assert pubsub.get_message(timeout=1.0) is None  # the subscribe confirmation
        transport.settle_and_claim([Settlement.release(lease)], 0)
        note = pubsub.get_message(timeout=1.0)
        assert note is not None
        assert note["data"] == b"1"
    finally:
        pubsub.close()


@pytest.mark.asyncio
async def test_async_settle_and_claim(
    async_transport_factory: Callable[..., Awaitable[AsyncRedisTransport]],
) -> None:
    transport = await async_transport_factory(clock=FakeClock())
    await transport.publish("g", Event(kind="1"))
    await transport.publish("g", Event(kind="2"))
    lease = await transport.claim()
    assert lease is not None
    result = await transport.settle_and_claim([Settlement.ack(lease)], 1)
    assert result.settled == [True]
    assert [x.event.kind for x in result.leases] == ["2"]
    assert (await transport.settle_and_claim([Settlement.ack(lease)], 0)).settled == [False]


_FIXED = Event(kind="k").created_at


def _dump(client: redis.Redis, prefix: str) -> dict[str, Any]:
    """Every key of a queue, by its name after the prefix (ids, tokens and the meta key's store
    identity, the time of the queue's first write, vary by queue)."""
    out: dict[str, Any] = {}
    for raw_key in client.scan_iter(match=prefix.replace("[", "\\[") + "*"):
        name = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
        key = name[len(prefix) :]
        kind = client.type(raw_key)
        value: Any
        if kind in (b"hash", "hash"):
            value = {k: v for k, v in client.hgetall(raw_key).items() if k != b"token"}
        elif kind in (b"zset", "zset"):
            value = client.zrange(raw_key, 0, -1, withscores=True)
        elif key == "meta":
            value = client.exists(raw_key)
        else:
            value = client.get(raw_key)
        out[key] = value
    return out
