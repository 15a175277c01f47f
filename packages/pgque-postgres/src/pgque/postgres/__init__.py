"""pgque.postgres — the PostgreSQL transport of pgque (psycopg 3, blocking API).

``connect("postgresql://...")`` picks it through the ``pgque.transports`` entry point; or build
one yourself::

    from pgque.postgres import PostgresTransport

    transport = PostgresTransport.from_dsn("postgresql://localhost/app", queue="orders")

The modules beside this one are generated from ``pgque.postgres_async`` (do not edit them),
except ``_cli.py``: the ``pgque install`` and ``pgque migrate`` commands, which this package
adds to the ``pgque`` command line (entry-point group ``pgque.cli_commands``).
:class:`PostgresPartitionAdapter` is what pgque.partition uses on this transport (entry-point
group ``pgque.partition_adapters``).
"""

from __future__ import annotations

from typing import Any

from pgque.core.registry import Backend
from pgque.postgres._options import command_options, split_url
from pgque.postgres._partition import PostgresPartitionAdapter
from pgque.postgres._schema import (
    DEFAULT_ROLES,
    LATEST_VERSION,
    REQUIRED_VERSION,
    check_schema,
    create_roles,
    install_schema,
    schema_version,
)
from pgque.postgres._transport import ORIGIN, PostgresTransport

__all__ = [
    "split_url",
    "PostgresTransport",
    "PostgresBackend",
    "PostgresPartitionAdapter",
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


def _open(url: str, **options: Any) -> PostgresTransport:
    dsn, kwargs = split_url(url, options)
    return PostgresTransport.from_dsn(dsn, **kwargs)


#: The entry point of ``postgresql://`` and ``postgres://`` for ``connect()``.
PostgresBackend = Backend(package="pgque-postgres", open=_open, command_options=command_options)
