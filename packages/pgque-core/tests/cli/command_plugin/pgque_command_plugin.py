"""Test-only ``pgque`` commands, contributed through ``pgque.cli_commands`` by a generated
``.dist-info`` on ``PYTHONPATH`` (see test_cli_plugins.py)."""

from __future__ import annotations

import click

from pgque.core.cli.commands import CliError, common_options, resolve_config
from pgque.core.errors import ConnectionLost


def hello() -> click.Command:
    """Return ``pgque hello``: echoes the queue it would work on."""

    @common_options
    @click.option("--name", default="world", show_default=True)
    def command(name: str, url: str | None, queue: str | None, env_file: object) -> None:
        """Say hello to NAME on the configured queue."""
        config = resolve_config(url, queue, None)
        click.echo(f"hello {name} on {config.queue}")

    return click.command(name="hello")(command)


def failing() -> click.Command:
    """Return ``pgque failing``: fails the way its --how says, inside the error boundary."""

    @click.option("--how", type=click.Choice(["cli", "pgque", "bug"]), default="cli")
    def command(how: str) -> None:
        """Fail."""
        if how == "cli":
            raise CliError("the contributed command failed", exit_code=3)
        if how == "pgque":
            raise ConnectionLost("cannot reach the contributed server")
        raise RuntimeError("a bug in the contributed command")

    return click.command(name="failing")(command)


def not_a_command() -> object:
    """Return something that is not a click command."""
    return "not a command"


def stats() -> click.Command:
    """Return a ``stats`` that must not replace pgque's own."""
    return click.command(name="stats")(lambda: click.echo("the impostor stats"))
