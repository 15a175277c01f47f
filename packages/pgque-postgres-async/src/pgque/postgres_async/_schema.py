"""Install and migrate the pgque schema (asyncio API).

Installation is idempotent and safe to race: it runs in one transaction under a
transaction-scoped advisory lock, so eight workers starting at once install it exactly once and
the others find it done. A database without the schema gets the fresh-install script; an older
one gets the missing migrations, in order.
"""

# This file is the source of its blocking twin (tools/async_to_sync.py).  # async-only

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from pgque.core.errors import SchemaMismatch
from pgque.postgres_async._errors import wrap_errors
from pgque.postgres_async._sql import LATEST_VERSION, migrations, queries, schema_sql

__all__ = [
    "schema_version",
    "install_schema",
    "check_schema",
    "create_roles",
    "LATEST_VERSION",
    "REQUIRED_VERSION",
    "DEFAULT_ROLES",
]

#: The role names :func:`create_roles` uses unless told otherwise.
DEFAULT_ROLES = {"producer": "pgque_producer", "worker": "pgque_worker", "admin": "pgque_admin"}

#: The oldest schema version this code works with: the functions it calls exist from
#: migration 21 on (browse and search, pgque_messages_v1 and its siblings; from 19 the live
#: workers, pgque_heartbeat_v1 and its siblings; from 17 the publish
#: entry points with a fairness key, pgque_publish_v2 and its siblings; the key policies and
#: listings; pgque_group_key_v1), and 17 made the claims share between fairness keys as the
#: code expects.
#: An older schema is migrated on open with ``setup=True`` and refused with SchemaMismatch
#: otherwise.
REQUIRED_VERSION = 21


async def schema_version(conn: AsyncConnection[Any]) -> int | None:
    """Return the installed schema version, or None if pgque's schema is not installed.

    Raises ConnectionLost or PgqueError when the query fails.
    """
    with wrap_errors("reading the pgque schema version"):
        cursor = await conn.execute(queries()["schema_exists"], prepare=False)
        exists = await cursor.fetchone()
        if exists is None or not exists[0]:
            return None
        cursor = await conn.execute(queries()["schema_version"], prepare=False)
        row = await cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def _applied_versions(conn: AsyncConnection[Any]) -> set[int]:
    cursor = await conn.execute(queries()["schema_versions"], prepare=False)
    return {int(row[0]) for row in await cursor.fetchall()}


async def install_schema(conn: AsyncConnection[Any], *, via_migrations: bool = False) -> int:
    """Create or upgrade pgque's schema to the latest version; return that version.

    A fresh database gets the fresh-install script of ``schema/`` (or, with *via_migrations*,
    every migration in order);
    an installed one gets every migration it lacks, in version order (also one numbered below
    the installed version, as happens when branches land out of order). Concurrent callers
    serialise on an advisory lock, so this is safe to call from every worker at start-up.
    Raises ConnectionLost or PgqueError when a statement fails (nothing is changed then).
    """
    with wrap_errors("installing the pgque schema"):
        async with conn.transaction():
            await conn.execute(queries()["install_lock"], prepare=False)
            current = await schema_version(conn)
            if current is None and not via_migrations:
                await conn.execute(schema_sql(), prepare=False)
            else:
                applied = set() if current is None else await _applied_versions(conn)
                for migration in migrations():
                    if migration.version not in applied:
                        await conn.execute(migration.sql, prepare=False)
    return max(LATEST_VERSION, current or 0)


async def check_schema(conn: AsyncConnection[Any]) -> int:
    """Return the installed version; raise SchemaMismatch if it is missing or too old."""
    version = await schema_version(conn)
    if version is None or version < REQUIRED_VERSION:
        found = "not installed" if version is None else f"at version {version}"
        raise SchemaMismatch(
            f"the pgque schema is {found}; this code needs version {REQUIRED_VERSION} or newer "
            "(run pgque migrate, or open the transport with setup=True)"
        )
    return version


async def create_roles(
    conn: AsyncConnection[Any],
    *,
    producer: str = DEFAULT_ROLES["producer"],
    worker: str = DEFAULT_ROLES["worker"],
    admin: str = DEFAULT_ROLES["admin"],
) -> None:
    """Create the producer, worker and admin roles (if missing) and grant each its functions.

    The admin role becomes the owner of the schema. Idempotent: run it again after a migrate so
    new functions get their grants. Needs CREATEROLE and membership in *admin* (a superuser has
    both); the schema must be installed. Raises SchemaMismatch when it is not, ConnectionLost
    or PgqueError when a statement fails (for instance without the privileges).
    """
    await check_schema(conn)
    with wrap_errors("creating the pgque roles"):
        async with conn.transaction():
            await conn.execute(
                queries()["setup_roles"],
                {"producer": producer, "worker": worker, "admin": admin},
                prepare=False,
            )
