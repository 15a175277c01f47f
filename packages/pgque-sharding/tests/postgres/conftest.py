"""The conformance suite on the sharded layer over three PostgreSQL primaries (blocking).

Three throwaway clusters (the plugin's ``postgres_shard_urls``); each test's sharded queue
has one sub-queue on each, purged at teardown. ``nox -s conformance-sharded-postgres``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pgque.conformance import TransportFactory
from pgque.conformance.sharded import sharded_factory
from pgque.core import Transport
from pgque.postgres import PostgresTransport


@pytest.fixture(scope="session")
def shard_dsns(postgres_shard_urls: list[str]) -> list[str]:
    """The three primaries, each with pgque's schema installed."""
    for url in postgres_shard_urls:
        PostgresTransport.from_dsn(url, min_size=1, max_size=1).close()
    return postgres_shard_urls


@pytest.fixture
def transport_factory(shard_dsns: list[str]) -> Iterator[TransportFactory]:
    """Open sharded transports with one PostgresTransport per primary; purge and close them."""
    opened: list[PostgresTransport] = []
    queues: dict[str, list[str]] = {dsn: [] for dsn in shard_dsns}

    def shard_on(dsn: str) -> TransportFactory:
        def make(**options: Any) -> Transport:
            options.setdefault("min_size", 1)
            options.setdefault("max_size", 2)
            transport = PostgresTransport.from_dsn(dsn, **options)
            opened.append(transport)
            queues[dsn].append(transport.queue)
            return transport

        return make

    yield sharded_factory([shard_on(dsn) for dsn in shard_dsns])
    for transport in opened:
        transport.close()
    for dsn, names in queues.items():
        with psycopg.connect(dsn, autocommit=True) as conn:
            for queue in set(names):
                PostgresTransport(conn, queue=queue, setup=False).purge()
