"""The caller's connection for a transactional publish: psycopg's own, or SQLAlchemy's.

``publish(..., connection=...)`` runs on the caller's connection inside its open transaction.
That connection may be a psycopg connection, or a SQLAlchemy ``Session`` / ``Connection``
(``AsyncSession`` / ``AsyncConnection`` on the asyncio transport) whose driver is psycopg 3
(``postgresql+psycopg://``): the psycopg connection under it is used, inside the session's
transaction (a session without one begins it, as SQLAlchemy does on first use). SQLAlchemy is
imported only when such an object is given.
"""

# This file is the source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from pgque.core.errors import InvalidInput

__all__ = ["psycopg_connection"]

_WANTED = (
    "a psycopg AsyncConnection, or a SQLAlchemy AsyncSession or AsyncConnection"  # async-only
    # sync: "a psycopg Connection, or a SQLAlchemy Session or Connection"
    " on psycopg 3"
)


async def psycopg_connection(connection: object) -> AsyncConnection[Any]:
    """Return the psycopg connection *connection* is or wraps; raise InvalidInput otherwise
    (another object, or SQLAlchemy on another driver)."""
    if isinstance(connection, AsyncConnection):
        return connection
    if type(connection).__module__.split(".", 1)[0] == "sqlalchemy":
        driver = await _under_sqlalchemy(connection)
        if isinstance(driver, AsyncConnection):
            return driver
        raise InvalidInput(
            f"the SQLAlchemy connection's driver is {type(driver).__module__}."
            f"{type(driver).__name__}: pgque joins a transaction on psycopg 3 only "
            "(a postgresql+psycopg:// URL)"
        )
    raise InvalidInput(f"connection must be {_WANTED}, not {type(connection).__name__}")


async def _under_sqlalchemy(connection: object) -> object:
    """The DBAPI (driver) connection under a SQLAlchemy session or connection."""
    from sqlalchemy.ext.asyncio import AsyncConnection as SAConnection  # async-only
    from sqlalchemy.ext.asyncio import AsyncSession as SASession  # async-only
    from sqlalchemy.ext.asyncio import async_scoped_session as scoped  # async-only

    # sync: from sqlalchemy.engine import Connection as SAConnection
    # sync: from sqlalchemy.orm import Session as SASession
    # sync: from sqlalchemy.orm import scoped_session as scoped

    target: Any = connection
    if isinstance(target, scoped):
        target = target()  # the current session of a scoped session
    if isinstance(target, SASession):
        target = await target.connection()  # the session's transaction (begun if none)
    if not isinstance(target, SAConnection):
        raise InvalidInput(f"connection must be {_WANTED}, not {type(connection).__name__}")
    raw = await target.get_raw_connection()  # async-only
    # sync: raw = target.connection
    return raw.driver_connection
