"""A lease carries its store's identity (the queue's meta key, written by its first write on a
server and database), so a lease of another Redis database, or server, is refused with
InvalidInput even for a queue of the same name, instead of being fenced (False)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from pgque.core import Event, InvalidInput, Settlement
from pgque.redis import RedisTransport, key_prefix

#: A database of the test server no test process uses (each uses its own, counted from 0).
OTHER_DB = 15


def _client(redis_url: str, db: int | None = None) -> redis.Redis:
    """A client of the test server (of database *db*, when given)."""
    client = redis.Redis.from_url(redis_url)
    if db is None:
        return client
    pool = client.connection_pool
    other = redis.Redis(
        connection_pool=redis.ConnectionPool(
            connection_class=pool.connection_class, **{**pool.connection_kwargs, "db": db}
        )
    )
    client.close()
    return other


@pytest.fixture
def two_databases(redis_url: str) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    """Clients of two databases of the test server; queue 'origin_q' emptied in both after."""
    clients = (_client(redis_url), _client(redis_url, OTHER_DB))
    yield clients
    for client in clients:
        pattern = key_prefix("origin_q").replace("[", "\\[") + "*"
        keys = list(client.scan_iter(match=pattern))
        if keys:
            client.delete(*keys)
        client.close()


def test_a_lease_of_another_database_with_the_same_queue_name_is_refused(
    two_databases: tuple[redis.Redis, redis.Redis],
) -> None:
    first_client, second_client = two_databases
    with (
        RedisTransport(client=first_client, queue="origin_q") as first,
        RedisTransport(client=second_client, queue="origin_q") as second,
    ):
        first.publish("g", Event(kind="k"))
        second.publish("g", Event(kind="k"))
        lease = first.claim()
        own = second.claim()
        assert lease is not None
        assert own is not None
        assert lease.origin != own.origin
        assert lease.origin.startswith("redis:")
        for call in (
            lambda: second.ack(lease),
            lambda: second.nack(lease),
            lambda: second.release(lease),
            lambda: second.extend(lease, 10.0),
            lambda: second.dead_letter(lease, "r"),
            lambda: second.ack_many([lease]),
            lambda: second.settle_and_claim([Settlement(lease, "ack")], 0),
        ):
            with pytest.raises(InvalidInput, match="another store"):
                call()
        assert second.ack(own)
        assert first.ack(lease)


def test_every_transport_of_one_queue_shares_its_identity(
    two_databases: tuple[redis.Redis, redis.Redis],
) -> None:
    client, _ = two_databases
    with RedisTransport(client=client, queue="origin_q") as issuer:
        issuer.publish("g", Event(kind="k"))
        lease = issuer.claim()
        assert lease is not None
        with RedisTransport(client=client, queue="origin_q") as later:
            assert later.ack(lease)  # a transport opened after the lease was issued
