"""``pgque install`` and ``pgque migrate``: apply or upgrade the Postgres schema explicitly, for
teams that forbid DDL when an application starts.

This package adds them to the ``pgque`` command line through the entry-point group
``pgque.cli_commands`` (each entry names a factory below, so that the entry point loads
without click). They need pgque-core's ``cli`` extra, as every ``pgque`` command does.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

import psycopg

from pgque.core.errors import ConnectionLost
from pgque.core.urls import mask_url
from pgque.postgres._options import split_url
from pgque.postgres._schema import create_roles, install_schema, schema_version

if TYPE_CHECKING:
    import click

__all__ = ["apply_schema", "POSTGRES_SCHEMES", "install_command", "migrate_command"]

POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})
#: The URL options that set the connect timeout (``timeout`` is its older name).
_CONNECT_TIMEOUTS = frozenset({"connect_timeout", "timeout"})


def apply_schema(url: str, action: str, roles: dict[str, str] | None = None) -> str:
    """Install or upgrade the schema at *url*; return what was done (one line per step).

    With *roles* (``producer``, ``worker``, ``admin`` names), also create those roles and grant
    each its functions (needs CREATEROLE; see the security page). Raises ConnectionLost when
    the server cannot be reached, PgqueError when a statement fails.
    """
    from pgque.core.cli.commands import current_connect_timeout, one_line

    # Without pgque's own query options: what libpq accepts; the URL's connect timeout wins.
    given = {k: v for k, v in parse_qsl(urlsplit(url).query) if k in _CONNECT_TIMEOUTS}
    dsn, options = split_url(url, given)
    where = mask_url(dsn)
    wait = min((float(v) for v in options.values()), default=current_connect_timeout())
    deadline = time.monotonic() + wait
    while True:
        try:
            # libpq's connect_timeout: whole seconds, 2 at least.
            left = max(2, math.ceil(deadline - time.monotonic()))
            with psycopg.connect(dsn, autocommit=True, connect_timeout=left) as conn:
                before = schema_version(conn)
                after = install_schema(conn)
                if roles is not None:
                    create_roles(conn, **roles)
            break
        except psycopg.Error as exc:
            # A server that answers "starting up" is waited for (--connect-timeout); anything
            # else, a refused connection first, fails at once.
            if "starting up" in str(exc) and time.monotonic() + 0.2 < deadline:
                time.sleep(0.2)
                continue
            raise ConnectionLost(
                f"cannot {action} the pgque schema on {where}: {type(exc).__name__}: "
                f"{one_line(str(exc))}"
            ) from exc
    if before is None:
        done = f"installed the pgque schema (version {after}) on {where}"
    elif before == after:
        done = f"the pgque schema on {where} is already at version {after}: nothing to do"
    else:
        done = f"upgraded the pgque schema on {where} from version {before} to {after}"
    if roles is not None:
        names = ", ".join(f"{kind} {name}" for kind, name in roles.items())
        done += f"\ncreated or updated the roles: {names}"
    return done


def _schema_command(action: str) -> click.Command:
    import click

    from pgque.core.cli.commands import common_options, resolve_config

    verb = "Create" if action == "install" else "Upgrade"

    @common_options
    @click.option(
        "--create-roles",
        is_flag=True,
        help="Also create the producer, worker and admin roles and grant them (needs CREATEROLE).",
    )
    @click.option("--producer-role", default="pgque_producer", show_default=True, metavar="NAME")
    @click.option("--worker-role", default="pgque_worker", show_default=True, metavar="NAME")
    @click.option("--admin-role", default="pgque_admin", show_default=True, metavar="NAME")
    def command(
        create_roles: bool,
        producer_role: str,
        worker_role: str,
        admin_role: str,
        url: str | None,
        queue: str | None,
        env_file: Path | None,
    ) -> None:
        config = resolve_config(url, queue, env_file)
        scheme = config.scheme
        if scheme not in POSTGRES_SCHEMES:
            click.echo(f"nothing to {action} for {scheme}://: this backend keeps no schema")
            return
        roles = (
            {"producer": producer_role, "worker": worker_role, "admin": admin_role}
            if create_roles
            else None
        )
        click.echo(apply_schema(config.url, action, roles))

    command.__doc__ = (
        f"{verb} the pgque schema in a PostgreSQL database (idempotent).\n\n"
        "With --create-roles, also create (or refresh the grants of) the roles of least "
        "privilege: a producer that can only publish, a worker that can only claim and settle, "
        "an admin that owns the schema. Run it again after every migrate.\n\n"
        "Other backends keep no schema: for them this says so and exits 0.\n\n"
        "\b\nExample:\n"
        f"  pgque {action} --url postgresql://admin@db.example.com/app --create-roles"
    )
    return click.command(name=action)(command)


def install_command() -> click.Command:
    """Return ``pgque install`` (the ``pgque.cli_commands`` entry point ``install``)."""
    return _schema_command("install")


def migrate_command() -> click.Command:
    """Return ``pgque migrate`` (the ``pgque.cli_commands`` entry point ``migrate``)."""
    return _schema_command("migrate")
