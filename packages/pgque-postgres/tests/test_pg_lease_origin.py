"""A lease carries its store's identity (the cluster's system identifier and the database), so
a lease of another database is refused with InvalidInput, even for a queue of the same name,
instead of being fenced (False) as if it were this store's stale lease."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from pgque.core import Event, InvalidInput, Settlement
from pgque.postgres import PostgresTransport


def test_a_lease_of_another_database_with_the_same_queue_name_is_refused(
    scratch_db: Callable[[], str],
) -> None:
    first_url, second_url = scratch_db(), scratch_db()
    with (
        PostgresTransport.from_dsn(first_url, queue="orders") as first,
        PostgresTransport.from_dsn(second_url, queue="orders") as second,
    ):
        first.publish("g", Event(kind="k"))
        second.publish("g", Event(kind="k"))
        lease = first.claim()
        own = second.claim()
        assert lease is not None
        assert own is not None
        assert lease.origin != own.origin
        assert lease.origin.startswith("postgresql:")
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
        assert second.ack(own)  # its own lease settles
        assert first.ack(lease)  # untouched by the refused calls


def test_a_transport_new_to_the_store_accepts_its_leases(postgres_url: str) -> None:
    """Two transports of one database (one opened after the lease was issued, one on a
    caller's connection) share the store's identity: each settles the other's lease."""
    with PostgresTransport.from_dsn(postgres_url, queue="origin_shared") as issuer:
        issuer.purge()
        issuer.publish("g", Event(kind="k"))
        issuer.publish("g", Event(kind="k"))
        lease = issuer.claim()
        assert lease is not None
        with PostgresTransport.from_dsn(postgres_url, queue="origin_shared") as later:
            assert later.ack(lease)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            caller = PostgresTransport(conn, queue="origin_shared", setup=False)
            second = caller.claim()
            assert second is not None
            assert second.origin == lease.origin
            assert issuer.ack(second)
        issuer.purge()
