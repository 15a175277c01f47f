"""``pgque install`` and ``pgque migrate``: apply or upgrade the Postgres schema explicitly, for
teams that forbid DDL when an application starts."""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

import click

from pgque.core.cli._common import (
    CliError,
    common_options,
    current_connect_timeout,
    one_line,
    resolve_config,
)
from pgque.core.errors import ConnectionLost
from pgque.core.install import install_hint
from pgque.core.urls import mask_url

__all__ = ["COMMANDS", "apply_schema", "POSTGRES_SCHEMES"]

POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})


def _postgres() -> Any:
    try:
        return importlib.import_module("pgque.postgres")
    except ImportError as exc:
        raise CliError(
            "installing the schema needs the Postgres transport; run: "
            + install_hint("pgque-postgres")
        ) from exc


def _dsn(postgres: Any, url: str) -> str:
    """Return *url* without pgque's own query options (what libpq accepts).

    The transport package owns the option list and libpq's quoting rules; asking it keeps the
    command line from drifting when an option is added.
    """
    dsn: str = postgres.split_url(url, {})[0]
    return dsn


def apply_schema(url: str, action: str, roles: dict[str, str] | None = None) -> str:
    """Install or upgrade the schema at *url*; return what was done (one line per step).

    With *roles* (``producer``, ``worker``, ``admin`` names), also create those roles and grant
    each its functions (needs CREATEROLE; see the security page). Raises CliError when the
    Postgres transport is missing, ConnectionLost when the server cannot be reached, PgqueError
    when a statement fails.
    """
    postgres = _postgres()
    import psycopg

    dsn = _dsn(postgres, url)
    where = mask_url(dsn)
    wait = current_connect_timeout()
    deadline = time.monotonic() + wait
    while True:
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
                before = postgres.schema_version(conn)
                after = postgres.install_schema(conn)
                if roles is not None:
                    postgres.create_roles(conn, **roles)
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


install = _schema_command("install")
migrate = _schema_command("migrate")

COMMANDS: list[click.Command] = [install, migrate]
