"""The ``pgque`` click group and the error boundary every command runs inside."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

import click

from pgque.core.cli._errors import CliError, one_line
from pgque.core.cli._plugins import PgqueGroup
from pgque.core.errors import PgqueError
from pgque.core.urls import mask_url

__all__ = ["cli", "run"]

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=PgqueGroup, context_settings=_CONTEXT)
@click.version_option(package_name="pgque-core", prog_name="pgque")
def cli() -> None:
    """Operate pgque queues: run workers, publish, inspect, repair, and run the demo.

    The queue URL comes from --url, else PGQUE_URL in the environment, else a .env file
    (pydantic-settings rules; --env-file picks another file). Run `pgque COMMAND --help`
    for each command's options.
    """


def _register() -> None:
    # Imported here so that each module stays small and `pgque --help` stays one place.
    from pgque.core.cli import (
        _bench,
        _browse,
        _bulk,
        _delayed,
        _demo,
        _groups,
        _history,
        _keys,
        _ops,
        _schedule_cmd,
        _worker_cmd,
        _workers,
    )

    # Other distributions add theirs (`pgque install` and `migrate` come with pgque-postgres,
    # `pgque dashboard` and `metrics` with pgque-dashboard) through the entry-point group
    # pgque.cli_commands: see PgqueGroup.
    modules = [
        _demo,
        _worker_cmd,
        _schedule_cmd,
        _ops,
        _delayed,
        _groups,
        _bulk,
        _keys,
        _history,
        _workers,
        _browse,
    ]
    # `pgque bench` is offered only where its harness (the repository's benchmarks/) is.
    if _bench.harness_installed():
        modules.append(_bench)
    for module in modules:
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def _scrub(text: str, argv: Sequence[str]) -> str:
    """Mask any URL from the command line that an unexpected error message might echo."""
    for arg in argv:
        value = arg.split("=", 1)[1] if arg.startswith("--url=") else arg
        if "://" in value and "@" in value:
            text = text.replace(value, mask_url(value))
    return text


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"pgque: error: {one_line(message)}\n")
    sys.stderr.flush()
    return code


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line on *argv* and return the exit status; never raises.

    Usage errors exit 2, operational errors 1, an interrupt 130; each prints one line on
    stderr. Set PGQUE_DEBUG=1 to get the traceback of an unexpected error.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="pgque", standalone_mode=False)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "pgque"
        return _fail(f"{exc.format_message()} (see `{where} --help`)", 2)
    except click.Abort:
        return _fail("interrupted", 130)
    except click.ClickException as exc:
        return _fail(exc.format_message(), exc.exit_code or 1)
    except CliError as exc:
        return _fail(str(exc), exc.exit_code)
    except PgqueError as exc:
        return _fail(str(exc), 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        return 1
    except Exception as exc:
        if os.environ.get("PGQUE_DEBUG", "") not in {"", "0"}:
            traceback.print_exc()
        detail = _scrub(f"{type(exc).__name__}: {exc}", args)
        return _fail(f"unexpected {detail} (set PGQUE_DEBUG=1 for the traceback)", 1)
    return result if isinstance(result, int) else 0
