"""``pgque scheduler MODULE:SCHEDULE`` runs a schedule; ``pgque schedules`` lists its entries."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.box import SIMPLE_HEAD
from rich.console import Console
from rich.table import Table

from pgque.core.cli._config import Config, resolve_config
from pgque.core.cli._conflicts import retrying
from pgque.core.cli._connecting import open_transport, quick_options
from pgque.core.cli._errors import CliError
from pgque.core.cli._flags import common_options
from pgque.core.cli._ops import iso_utc, short_utc
from pgque.core.cli._reach import wait_until_reachable
from pgque.core.cli._worker_cmd import debug_requested, load_object
from pgque.core.errors import InvalidInput
from pgque.core.registry import connect, connect_async
from pgque.core.scheduling import DEFAULT_GRACE_S, AsyncScheduler, Schedule, Scheduler
from pgque.core.scheduling._entry import ScheduleEntry

__all__ = ["COMMANDS", "load_schedule"]

log = logging.getLogger("pgque.cli")


def load_schedule(spec: str, *, debug: bool = False) -> Schedule:
    """Import ``MODULE:SCHEDULE`` and return the :class:`~pgque.core.Schedule` it names.

    Raises CliError as ``pgque worker`` does for a module that cannot be imported, and for an
    attribute that is not a Schedule or has no entries.
    """
    target = load_object(spec, what="SCHEDULE", example="myapp.beat:schedule", debug=debug)
    if not isinstance(target, Schedule):
        raise CliError(f"{spec} is a {type(target).__name__}, not a pgque.core.Schedule")
    if not len(target):
        raise CliError(f"{spec} has no entries")
    return target


_SPEC = click.argument("schedule_spec", metavar="MODULE:SCHEDULE")
_DEBUG = click.option(
    "--debug",
    is_flag=True,
    help="Print the traceback when MODULE fails to import [env PGQUE_DEBUG=1].",
)


@click.command()
@_SPEC
@click.option(
    "--grace",
    type=click.FloatRange(0, 86_400),
    default=DEFAULT_GRACE_S,
    show_default=True,
    metavar="SECONDS",
    help="How late a tick may be published and still count as on time; older ticks follow "
    "their entry's missed-tick policy.",
)
@click.option(
    "--asyncio", "use_asyncio", is_flag=True, help="Run the asyncio scheduler and transport."
)
@click.option("--name", default=None, help="Scheduler name for logs (default host:pid).")
@_DEBUG
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@common_options
def scheduler(
    schedule_spec: str,
    grace: float,
    use_asyncio: bool,
    name: str | None,
    debug: bool,
    log_level: str,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Publish each tick of SCHEDULE's entries to the queue until SIGINT or SIGTERM.

    SCHEDULE is a pgque.core.Schedule. Several schedulers may run on one queue at once (on
    several machines, for high availability): each tick is published exactly once. Logs each
    tick it publishes; prints how many on exit, as JSON.

    \b
    Example:
      pgque scheduler myapp.beat:schedule --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    schedule = load_schedule(schedule_spec, debug=debug_requested(debug))
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # A starting scheduler waits up to --connect-timeout for its server, then exits with one
    # line; once running, it rides out an outage of any length.
    wait_until_reachable(config)
    options = quick_options(config.url, config.options, one_shot=False)
    kwargs: dict[str, Any] = {"grace": grace, "name": name}
    if use_asyncio:
        published = asyncio.run(_run_async(config, schedule, options, kwargs))
    else:
        with connect(config.url, **options) as transport:
            try:
                runner = Scheduler(transport, schedule, **kwargs)
            except InvalidInput as exc:
                raise CliError(str(exc), 2) from exc
            _started(runner.name, transport.queue, config, schedule, "threads")
            published = runner.run()
    click.echo(json.dumps({"published": published}))


async def _run_async(
    config: Config, schedule: Schedule, options: dict[str, Any], kwargs: dict[str, Any]
) -> int:
    async with connect_async(config.url, **options) as transport:
        try:
            runner = AsyncScheduler(transport, schedule, **kwargs)
        except InvalidInput as exc:
            raise CliError(str(exc), 2) from exc
        _started(runner.name, transport.queue, config, schedule, "asyncio")
        return await runner.run()


def _started(name: str, queue: str, config: Config, schedule: Schedule, flavour: str) -> None:
    log.info(
        "scheduler %s on queue %s at %s, %d entries (%s)",
        name,
        queue,
        config.masked_url,
        len(schedule),
        flavour,
    )


def _iso(tick: float | None) -> str | None:
    """Return *tick* as the command line's JSON time (:func:`iso_utc`), None for None."""
    return None if tick is None else iso_utc(tick)


def _local(tick: float, entry: ScheduleEntry) -> str:
    """Return *tick* as a wall time of *entry*'s time zone (the zone is in its own column)."""
    return datetime.fromtimestamp(tick, entry.zone).strftime("%Y-%m-%d %H:%M:%S")


@click.command()
@_SPEC
@click.option(
    "--count",
    "-n",
    type=click.IntRange(1, 100),
    default=3,
    show_default=True,
    help="How many next due times to show per entry.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@_DEBUG
@common_options
def schedules(
    schedule_spec: str,
    count: int,
    as_json: bool,
    debug: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """List SCHEDULE's entries: cron, time zone, group, missed-tick policy, next due times.

    With a queue URL (--url or PGQUE_URL), also the last tick published of each entry.

    \b
    Example:
      pgque schedules myapp.beat:schedule
      pgque schedules myapp.beat:schedule --url postgresql://localhost/app
    """
    schedule = load_schedule(schedule_spec, debug=debug_requested(debug))
    config = resolve_config(url, queue, env_file, require_url=False)
    last: dict[str, float | None] | None = None
    if config.url_given:
        with open_transport(config) as transport:
            reader = getattr(transport, "last_tick", None)
            if not callable(reader):
                raise CliError(f"the {config.scheme}:// transport records no schedule ticks")
            last = {
                entry.name: retrying(lambda e=entry: reader(e.name), "last_tick")  # type: ignore[misc]
                for entry in schedule
            }
    now = time.time()
    rows = [(entry, entry.next_ticks(now, count)) for entry in schedule]
    if as_json:
        for entry, ticks in rows:
            line: dict[str, Any] = {
                "name": entry.name,
                "cron": entry.cron,
                "tz": entry.tz,
                "group_id": entry.group_id,
                "kind": entry.kind,
                "priority": entry.priority,
                "missed": entry.missed,
                "max_catch_up": entry.max_catch_up,
                "next_due": [_iso(t) for t in ticks],
            }
            if last is not None:
                line["last_tick"] = _iso(last[entry.name])
            click.echo(json.dumps(line, sort_keys=True))
        return
    title = f"schedule {schedule_spec}"
    if last is not None:
        title += f" on queue {config.queue} at {config.masked_url}"
    table = Table(title=title, title_justify="left", box=SIMPLE_HEAD)
    # Identifiers never wrap (they end in an ellipsis; --json has them whole): each column holds
    # two short lines, so that a table of due times fits 80 columns.
    table.add_column("entry / missed", no_wrap=True, overflow="ellipsis", max_width=20)
    table.add_column("cron / tz", no_wrap=True, overflow="ellipsis", max_width=18)
    table.add_column("group / kind", no_wrap=True, overflow="ellipsis", max_width=18)
    table.add_column("next due (its tz)", no_wrap=True)
    if last is not None:
        table.add_column("last tick (UTC)", no_wrap=True)
    for entry, ticks in rows:
        cells = [
            f"{entry.name}\n{entry.describe_policy()}",
            f"{entry.cron}\n{entry.tz}",
            f"{entry.group_id}\n{entry.kind}",
            "\n".join(_local(t, entry) for t in ticks),
        ]
        if last is not None:
            tick = last[entry.name]
            cells.append("never" if tick is None else short_utc(tick))
        table.add_row(*cells)
    _print_whole(table)


def _print_whole(table: Table) -> None:
    """Print *table*: to a terminal fitted to its width, elsewhere (a pipe, a file) never cut.

    Piped, rich would assume 80 columns and end long cells in an ellipsis; a script reading
    the output needs every character, however wide the lines get. A width asked for with
    ``COLUMNS`` is fitted, piped or not.
    """
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        Console().print(table)
        return
    for column in table.columns:
        column.max_width = None
        column.overflow = "fold"
    console = Console(width=100_000)
    console.print(table, crop=False, width=console.measure(table).maximum)


COMMANDS: list[click.Command] = [scheduler, schedules]
