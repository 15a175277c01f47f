"""``pgque install`` and ``pgque migrate``: apply or upgrade the Postgres schema explicitly, for
teams that forbid DDL when an application starts."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import click

from pgque.core.cli._common import CliError, common_options, one_line, resolve_config
from pgque.core.errors import ConnectionLost
from pgque.core.urls import mask_url, parse_url, strip_query

__all__ = ["COMMANDS", "apply_schema", "POSTGRES_SCHEMES"]

POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})


#: Query options pgque's Postgres transports consume; the rest of the query goes to libpq.
_PGQUE_OPTIONS = frozenset(
    {"queue", "max_attempts", "on_exhausted", "setup", "min_size", "max_size", "timeout"}
)


def _postgres() -> Any:
    try:
        return importlib.import_module("pgque.postgres")
    except ImportError as exc:
        raise CliError(
            "installing the schema needs the Postgres transport; run: pip install pgque-postgres"
        ) from exc


def _dsn(url: str) -> str:
    """Return *url* without pgque's own query options (what libpq accepts)."""
    keep = frozenset(parse_url(url).options) - _PGQUE_OPTIONS
    return strip_query(url, keep=keep)


def apply_schema(url: str, action: str) -> str:
    """Install or upgrade the schema at *url*; return one line saying what was done.

    Raises CliError when the Postgres transport is missing, ConnectionLost when the server
    cannot be reached, PgqueError when a statement fails.
    """
    postgres = _postgres()
    import psycopg

    dsn = _dsn(url)
    where = mask_url(dsn)
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            before = postgres.schema_version(conn)
            after = postgres.install_schema(conn)
    except psycopg.Error as exc:
        raise ConnectionLost(
            f"cannot {action} the pgque schema on {where}: {type(exc).__name__}: "
            f"{one_line(str(exc))}"
        ) from exc
    if before is None:
        return f"installed the pgque schema (version {after}) on {where}"
    if before == after:
        return f"the pgque schema on {where} is already at version {after}: nothing to do"
    return f"upgraded the pgque schema on {where} from version {before} to {after}"


def _schema_command(action: str) -> click.Command:
    verb = "Create" if action == "install" else "Upgrade"

    @common_options
    def command(url: str | None, queue: str | None, env_file: Path | None) -> None:
        config = resolve_config(url, queue, env_file)
        scheme = config.scheme
        if scheme not in POSTGRES_SCHEMES:
            click.echo(f"nothing to {action} for {scheme}://: this backend keeps no schema")
            return
        click.echo(apply_schema(config.url, action))

    command.__doc__ = (
        f"{verb} the pgque schema in a PostgreSQL database (idempotent).\n\n"
        "Other backends keep no schema: for them this says so and exits 0.\n\n"
        "\b\nExample:\n"
        f"  pgque {action} --url postgresql://admin@db.example.com/app"
    )
    return click.command(name=action)(command)


install = _schema_command("install")
migrate = _schema_command("migrate")

COMMANDS: list[click.Command] = [install, migrate]
