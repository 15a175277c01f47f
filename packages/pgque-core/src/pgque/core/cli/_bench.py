"""``pgque bench``: the side-by-side benchmark, when its harness (``benchmarks/``) is installed."""

from __future__ import annotations

import importlib
import importlib.util

import click

from pgque.core.cli._errors import CliError

__all__ = ["COMMANDS", "harness_installed"]


def harness_installed() -> bool:
    """Tell whether the benchmark harness (``pgque_bench``) can be imported here."""
    return importlib.util.find_spec("pgque_bench") is not None


@click.command(
    "bench",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> int:
    """Measure pgque beside Redis, peers and pgbench in one run (`pgque bench --help`).

    The harness lives in the repository's benchmarks/ folder (pip install -e benchmarks, or
    run `nox -s bench`). Raises CliError when it is not installed.
    """
    try:
        harness = importlib.import_module("pgque_bench")
    except ImportError as exc:
        raise CliError(
            "the benchmark harness is not installed: from a source checkout, run `nox -s bench`"
        ) from exc
    return int(harness.main(list(args)))


COMMANDS = [bench]
