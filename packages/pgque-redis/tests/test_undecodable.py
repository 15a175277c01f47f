"""One message whose stored event is not valid Event JSON (written by hand, or damaged) must not
fail a whole ``claim_many``: it is dead-lettered through its own fenced lease, with a reason that
says so, and the other leases are returned. Blocking and asyncio transports alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
import redis

from pgque.core import Event
from pgque.redis import AsyncRedisTransport, RedisTransport


def _spoil(raw: redis.Redis, transport: Any, message_id: int, body: bytes) -> None:
    raw.hset(transport.key_prefix + "msg", str(message_id), body)


def _hand_written_group(raw: redis.Redis, transport: Any, group: str, element: str) -> None:
    """A group whose message set holds *element*, added by hand (no event stored for it)."""
    p = transport.key_prefix
    raw.zadd(p + f"q:{group}", {element: 0})
    raw.hset(p + f"g:{group}", mapping={"prio": "0", "at": "0"})
    raw.zadd(p + "r0", {group: 0})
    raw.zadd(p + "kr:", {group: 0})  # the default key's ready set
    raw.zadd(p + "kq", {"": 0}, nx=True)


def _check_dead_letter(letters: list[Any], group: str) -> None:
    assert [letter.group_id for letter in letters] == [group]
    assert letters[0].reason.startswith("undecodable event")


def test_claim_many_returns_the_decodable_leases(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    ids = {g: transport.publish(g, Event(kind=g)) for g in ("a", "b", "c", "d")}
    _spoil(raw_client, transport, ids["b"], b"{not json")
    _spoil(raw_client, transport, ids["c"], b'{"kind": ""}')  # JSON, but not a valid Event
    transport.publish("b", Event(kind="b2"))
    leases = transport.claim_many(10)
    assert sorted(lease.event.kind for lease in leases) == ["a", "b2", "d"]
    letters = transport.dead_letters()
    assert sorted(letter.group_id for letter in letters) == ["b", "c"]
    assert all(letter.reason.startswith("undecodable event: ") for letter in letters)
    # The damaged text is kept for the operator, shown as an event of its own kind.
    assert {letter.event.kind for letter in letters} == {"pgque.undecodable"}
    shown = [cast(dict[str, Any], letter.event.data) for letter in letters]
    assert {data["text"] for data in shown} == {"{not json", '{"kind": ""}'}
    assert all(data["error"] for data in shown)  # why it did not decode
    assert all(transport.ack(lease) for lease in leases)
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.dead_letters) == (0, 0, 2)


def test_a_hand_written_group_element_is_dead_lettered(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    _hand_written_group(raw_client, transport, "bad", "garbage")
    transport.publish("good", Event(kind="ok"))
    lease = transport.claim()  # the bad head sorts first; claim goes on to the good one
    assert lease is not None
    assert lease.event.kind == "ok"
    letters = transport.dead_letters()
    _check_dead_letter(letters, "bad")
    assert letters[0].message_id == 0  # "garbage" is no message id
    assert transport.claim() is None
    assert transport.stats().groups == 1  # only "good" (leased) is left


def test_non_utf8_bytes_are_dead_lettered(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    transport = transport_factory()
    message_id = transport.publish("g", Event(kind="x"))
    _spoil(raw_client, transport, message_id, b"\xff\xfe{")
    assert transport.claim_many(5) == []
    _check_dead_letter(transport.dead_letters(), "g")


@pytest.mark.asyncio
async def test_async_claim_many_returns_the_decodable_leases(
    redis_url: str, new_queue: Callable[[], str], raw_client: redis.Redis
) -> None:
    async with AsyncRedisTransport(redis_url, queue=new_queue()) as transport:
        ids = {g: await transport.publish(g, Event(kind=g)) for g in ("a", "b", "c")}
        _spoil(raw_client, transport, ids["b"], b"[1, 2]")
        _hand_written_group(raw_client, transport, "hand", "17x")
        leases = await transport.claim_many(10)
        assert sorted(lease.event.kind for lease in leases) == ["a", "c"]
        letters = await transport.dead_letters()
        assert sorted(letter.group_id for letter in letters) == ["b", "hand"]
        assert all(letter.reason.startswith("undecodable event: ") for letter in letters)
        lease = await transport.claim()
        assert lease is None


def test_a_non_utf8_group_id_is_dead_lettered_and_listed(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """A group id that is not UTF-8 (written by hand) is dead-lettered like any undecodable
    head, and the listing shows it with its bad bytes escaped instead of failing."""
    transport = transport_factory()
    p = transport.key_prefix.encode()
    raw_client.zadd(p + b"q:\xffg", {"1": 1})
    raw_client.hset(p + b"msg", "1", Event(kind="x").to_json())
    raw_client.hset(p + b"g:\xffg", mapping={"prio": "0", "at": "0"})
    raw_client.zadd(p + b"r0", {b"\xffg": 0})
    raw_client.zadd(p + b"kr:", {b"\xffg": 0})
    raw_client.zadd(p + b"kq", {b"": 0}, nx=True)
    assert transport.claim_many(5) == []
    letters = transport.dead_letters()
    assert [letter.group_id for letter in letters] == ["\\xffg"]
    assert letters[0].reason.startswith("undecodable event")


def test_purged_messages_of_a_stranded_group_do_not_come_back_as_dead_letters(
    transport_factory: Callable[..., RedisTransport], raw_client: redis.Redis
) -> None:
    """purge finds groups through the groups index, the ready sets and the blocked and paused
    indexes; a group stranded by an outside deletion of its entries keeps its message set while
    purge deletes the bodies. When a later publish heals the group, its purged heads are gone,
    not undecodable: claim drops them."""
    transport = transport_factory()
    transport.publish("g", Event(kind="old"))
    transport.publish("g", Event(kind="old"))
    raw_client.zrem(transport.key_prefix + "r0", "g")  # stranded
    raw_client.zrem(transport.key_prefix + "groups", "g")
    transport.purge()
    transport.publish("g", Event(kind="new"))
    lease = transport.claim()
    assert lease is not None
    assert lease.event.kind == "new"
    assert transport.dead_letters() == []
    assert transport.ack(lease)
    stats = transport.stats()
    assert (stats.groups, stats.messages, stats.dead_letters) == (0, 0, 0)
