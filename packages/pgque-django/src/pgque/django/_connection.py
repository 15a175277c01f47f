"""Django's database connections as pgque needs them: the psycopg 3 connection under a Django
connection, and the DSN of a ``DATABASES`` entry."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.connection import ConnectionProxy
from pgque.core.errors import ConfigurationError, InvalidInput

__all__ = ["dsn_of", "is_django_connection", "psycopg_of"]

#: Keys of Django's connection parameters that are psycopg's or Django's, not libpq's.
_NOT_LIBPQ = frozenset(
    {
        "assume_role",
        "context",
        "cursor_factory",
        "isolation_level",
        "pool",
        "prepare_threshold",
        "server_side_binding",
    }
)


def is_django_connection(connection: object) -> bool:
    """Tell whether *connection* is a Django connection (``django.db.connection``,
    ``connections[alias]``)."""
    return isinstance(connection, BaseDatabaseWrapper | ConnectionProxy)


def _wrapper(alias: str) -> BaseDatabaseWrapper:
    if alias not in connections.settings:
        raise ConfigurationError(
            f"PGQUE['DATABASE'] is {alias!r}, which is not a key of settings.DATABASES"
        )
    wrapper: BaseDatabaseWrapper = connections[alias]
    if wrapper.vendor != "postgresql":
        raise ConfigurationError(
            f"DATABASES[{alias!r}] uses the {wrapper.vendor} backend: pgque needs PostgreSQL "
            "(django.db.backends.postgresql)"
        )
    return wrapper


def psycopg_of(connection: BaseDatabaseWrapper | ConnectionProxy | str) -> psycopg.Connection[Any]:
    """Return the psycopg 3 connection under a Django connection (or the connection of a
    ``DATABASES`` alias), connecting it if needed, in the calling thread.

    Raises InvalidInput when Django runs on psycopg2 (pgque joins transactions on psycopg 3
    only), ConfigurationError for an unknown alias or a database that is not PostgreSQL.
    """
    # django.db.connection is a proxy of the calling thread's connection of its alias.
    alias = connection if isinstance(connection, str) else connection.alias
    wrapper = _wrapper(alias)
    wrapper.ensure_connection()
    raw = wrapper.connection
    if not isinstance(raw, psycopg.Connection):
        raise InvalidInput(
            f"Django's connection {wrapper.alias!r} is a {type(raw).__module__}."
            f"{type(raw).__name__}: pgque joins Django's transactions on psycopg 3 only "
            "(install the psycopg package, which Django prefers to psycopg2)"
        )
    return raw


def dsn_of(alias: str) -> str:
    """Return the libpq connection string of ``DATABASES[alias]`` (NAME, USER, PASSWORD,
    HOST, PORT and the libpq keys of OPTIONS). Raises ConfigurationError for an unknown alias
    or a database that is not PostgreSQL."""
    wrapper = _wrapper(alias)
    params: dict[str, Any] = wrapper.get_connection_params()
    kept: dict[str, Any] = {
        key: value
        for key, value in params.items()
        if key not in _NOT_LIBPQ and value not in (None, "") and isinstance(value, str | int)
    }
    return make_conninfo(**kept)
