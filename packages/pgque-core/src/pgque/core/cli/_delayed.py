"""Delayed messages from the command line: ``publish --delay/--at`` (their parsing is here),
``pgque scheduled`` (list what is not due yet) and ``pgque cancel ID``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
from rich.box import SIMPLE_HEAD
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pgque.core.cli._browse import browsing_transport
from pgque.core.cli._config import resolve_config
from pgque.core.cli._conflicts import retrying
from pgque.core.cli._connecting import open_transport
from pgque.core.cli._errors import CliError
from pgque.core.cli._flags import common_options
from pgque.core.cli._never_used import refuse_never_used
from pgque.core.cli._ops import iso_utc, short_utc
from pgque.core.cli._when import delay_until, parse_at, parse_delay
from pgque.core.explain import relative_text
from pgque.core.models import ScheduledMessage
from pgque.core.validation import MAX_GROUPS_PAGE

__all__ = ["COMMANDS", "parse_delay", "parse_at", "delay_until", "scheduled_json"]


def scheduled_json(message: ScheduledMessage) -> dict[str, Any]:
    """Return *message* as the JSON object ``pgque scheduled --json`` prints."""
    out: dict[str, Any] = message.model_dump(mode="python")
    out["due_at"] = iso_utc(message.due_at)
    out["enqueued_at"] = iso_utc(message.enqueued_at)
    return out


@click.command(name="scheduled")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_GROUPS_PAGE),
    default=100,
    show_default=True,
    help="At most this many messages.",
)
@click.option(
    "--after",
    type=int,
    default=None,
    metavar="ID",
    help="Start after this message id (the last one of the previous page).",
)
@click.option(
    "--group",
    "group_id",
    default=None,
    metavar="GROUP",
    help="Only GROUP's scheduled messages (a backend that browses: docs/reference.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@common_options
def scheduled(
    limit: int,
    after: int | None,
    group_id: str | None,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """List the delayed messages not due yet, in id order, with their group and due time.

    A page holds --limit messages; pass the last id of a page as --after for the next one.
    With --group, only that group's (they join its tail when due). `pgque cancel ID` drops
    one.

    \b
    Example:
      pgque scheduled --url postgresql://localhost/app --limit 20
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        if group_id is None:
            page = retrying(lambda: transport.scheduled(limit=limit, after=after), "scheduled")
        else:
            browsing = browsing_transport(transport)
            page = retrying(
                lambda: browsing.scheduled(limit=limit, after=after, group_id=group_id),
                "scheduled",
            )
        name = transport.queue
        if not page:
            refuse_never_used(transport, config)
    if as_json:
        for message in page:
            click.echo(json.dumps(scheduled_json(message), sort_keys=True))
    elif page:  # an empty listing prints only its message, no empty table
        Console().print(_table(page, name))
    if not page:
        after_text = f" after {after}" if after is not None else ""
        click.echo(f"no scheduled messages{after_text}", err=True)
    elif len(page) == limit:
        click.echo(f"more scheduled messages may follow: --after {page[-1].id}", err=True)


def _table(page: list[ScheduledMessage], queue: str) -> Table:
    now = time.time()
    table = Table(
        title=f"scheduled messages of queue {queue}", title_justify="left", box=SIMPLE_HEAD
    )
    # Identifiers never wrap (group and kind share a cell, one per line, and end in an
    # ellipsis when too long; --json has them whole).
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("group / kind", no_wrap=True, overflow="ellipsis", max_width=30)
    table.add_column("prio", justify="right", no_wrap=True)
    table.add_column("due at (UTC)", no_wrap=True)
    table.add_column("due", no_wrap=True)
    for message in page:
        who = Text(message.group_id + "\n") + Text(message.kind, style="dim")
        table.add_row(
            str(message.id),
            who,
            str(message.priority),
            short_utc(message.due_at).replace("T", " ").removesuffix("Z"),
            relative_text(message.due_at, now),
        )
    return table


@click.command(name="cancel")
@click.argument("message_id", metavar="ID", type=click.IntRange(1))
@common_options
def cancel(message_id: int, url: str | None, queue: str | None, env_file: Path | None) -> None:
    """Drop scheduled message ID before it is due.

    Exits 1 when nothing was cancelled: the message is due (or delivered), unknown, or was
    published without a delay.

    \b
    Example:
      pgque cancel 17 --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        cancelled = retrying(lambda: transport.cancel(message_id), "cancel")
        name = transport.queue
    if not cancelled:
        raise CliError(
            f"nothing cancelled: message {message_id} is not a scheduled message of queue "
            f"{name!r} that is not due yet (it is due or delivered, unknown, or was published "
            "without a delay; `pgque scheduled` lists them)"
        )
    click.echo(f"cancelled scheduled message {message_id}")


COMMANDS: list[click.Command] = [scheduled, cancel]
