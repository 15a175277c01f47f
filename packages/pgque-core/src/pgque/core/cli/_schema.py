"""``pgque install`` and ``pgque migrate``: apply or upgrade the Postgres schema explicitly, for
teams that forbid DDL when an application starts."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import click

from pgque.core.cli._common import CliError, common_options, resolve_config
from pgque.core.urls import mask_url, parse_url, strip_query

__all__ = ["COMMANDS", "prepare_schema", "POSTGRES_SCHEMES"]

POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})


def _postgres_schema() -> Any:
    try:
        return importlib.import_module("pgque.postgres.schema")
    except ImportError as exc:
        raise CliError(
            "the Postgres schema tools are not installed; run: pip install pgque-postgres"
        ) from exc


def _apply(url: str, options: dict[str, Any], action: str) -> str:
    """Install or migrate the schema at *url*; return a line describing what was done."""
    schema = _postgres_schema()
    dsn = strip_query(url)
    result = schema.install(dsn) if action == "install" else schema.migrate(dsn)
    return str(result) if result is not None else f"schema {action}ed on {mask_url(dsn)}"


def prepare_schema(url: str, options: dict[str, Any]) -> None:
    """Install the schema for *url* if its backend has one (the demo calls this first)."""
    if parse_url(url).scheme in POSTGRES_SCHEMES:
        _apply(url, options, "install")


def _schema_command(action: str) -> click.Command:
    verb = "Create" if action == "install" else "Upgrade"

    @common_options
    def command(url: str | None, queue: str | None, env_file: Path | None) -> None:
        config = resolve_config(url, queue, env_file)
        scheme = config.scheme
        if scheme not in POSTGRES_SCHEMES:
            click.echo(f"nothing to {action} for {scheme}://: this backend keeps no schema")
            return
        click.echo(_apply(config.url, config.options, action))

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
