"""pgque.postgres_async — the asyncio PostgreSQL transport of pgque (psycopg 3).

``connect_async("postgresql://...")`` picks it through the ``pgque.transports`` entry point;
or build one yourself::

    from pgque.postgres_async import AsyncPostgresTransport

    transport = await AsyncPostgresTransport.from_dsn("postgresql://localhost/app", queue="orders")

:class:`AsyncPostgresPartitionAdapter` is what pgque.partition uses on this transport
(entry-point group ``pgque.partition_adapters``).
"""

from __future__ import annotations

from typing import Any

from pgque.core.registry import Backend
from pgque.postgres_async._options import command_options, split_url
from pgque.postgres_async._partition import AsyncPostgresPartitionAdapter
from pgque.postgres_async._schema import (
    DEFAULT_ROLES,
    LATEST_VERSION,
    REQUIRED_VERSION,
    check_schema,
    create_roles,
    install_schema,
    schema_version,
)
from pgque.postgres_async._transport import ORIGIN, AsyncPostgresTransport

__all__ = [
    "split_url",
    "AsyncPostgresTransport",
    "AsyncPostgresBackend",
    "AsyncPostgresPartitionAdapter",
    "install_schema",
    "create_roles",
    "DEFAULT_ROLES",
    "check_schema",
    "schema_version",
    "LATEST_VERSION",
    "REQUIRED_VERSION",
    "ORIGIN",
]

__version__ = "0.1.0"


def _open_async(url: str, **options: Any) -> AsyncPostgresTransport:
    dsn, kwargs = split_url(url, options)
    return AsyncPostgresTransport(dsn, **kwargs)


#: The entry point of ``postgresql://`` and ``postgres://`` for ``connect_async()``.
AsyncPostgresBackend = Backend(
    package="pgque-postgres-async", open_async=_open_async, command_options=command_options
)
