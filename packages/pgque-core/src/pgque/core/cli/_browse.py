"""Browse and search on the command line: ``messages`` lists the messages behind a group's
head (or those of a kind), ``message`` shows one by id (pgque.core.browse)."""

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

from pgque.core.browse import MAX_MESSAGES_PAGE, SCAN_ROWS, MessageInfo, MessagePage
from pgque.core.cli._config import resolve_config
from pgque.core.cli._conflicts import retrying
from pgque.core.cli._connecting import open_transport
from pgque.core.cli._errors import CliError
from pgque.core.cli._flags import common_options
from pgque.core.cli._ops import iso_utc
from pgque.core.contract import SupportsBrowse, Transport
from pgque.core.errors import InvalidInput
from pgque.core.explain import relative_text

__all__ = ["COMMANDS", "browsing_transport", "message_json"]


def browsing_transport(transport: Transport) -> SupportsBrowse:
    """The transport as one that browses; CliError when its backend does not."""
    if not transport.capabilities.browse or not isinstance(transport, SupportsBrowse):
        raise CliError(
            "this backend does not list messages (docs/reference.md lists the ones that do)"
        )
    return transport


def message_json(info: MessageInfo) -> dict[str, Any]:
    """*info* as the JSON object ``pgque messages --json`` / ``message --json`` print; times
    ISO 8601 UTC."""
    out: dict[str, Any] = info.model_dump(mode="json")
    out["enqueued_at"] = iso_utc(info.enqueued_at)
    out["due_at"] = None if info.due_at is None else iso_utc(info.due_at)
    return out


def _preview(info: MessageInfo) -> str:
    return info.preview + ("…" if info.truncated else "")


@click.command(name="messages")
@click.argument("group_id", metavar="[GROUP]", required=False)
@click.option("--kind", default=None, help="Only messages of this event kind.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_MESSAGES_PAGE),
    default=50,
    show_default=True,
    help="At most this many messages.",
)
@click.option(
    "--after",
    type=int,
    default=None,
    metavar="CURSOR",
    help="Go on from a page's end (the CURSOR it printed).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@common_options
def messages(
    group_id: str | None,
    kind: str | None,
    limit: int,
    after: int | None,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """List the messages waiting in GROUP in its order, head first (the one a claim delivers
    next, or holds); without GROUP, the queue's in id order.

    Each row shows the message id, its kind, attempts so far, its age, size (bytes of the
    stored event) and the start of its data. With --kind only messages of that kind: a scan
    that looks at most at 10,000 messages per call, so a page may be short; when more may
    follow, the command prints the --after CURSOR that goes on. Scheduled messages (not due
    yet) are listed by `pgque scheduled --group GROUP`.

    \b
    Examples:
      pgque messages order-42 --url postgresql://localhost/app
      pgque messages --kind invoice.send --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        browsing = browsing_transport(transport)
        try:
            page: MessagePage = retrying(
                lambda: browsing.messages(group_id=group_id, kind=kind, limit=limit, after=after),
                "messages",
            )
        except InvalidInput as exc:
            raise CliError(str(exc), 2) from exc
        name = transport.queue
    if as_json:
        for info in page.items:
            click.echo(json.dumps(message_json(info), sort_keys=True))
        _more(page)
        return
    if not page.items:
        where = f" in group {group_id!r}" if group_id is not None else ""
        what = f" of kind {kind!r}" if kind is not None else ""
        click.echo(f"no messages{what}{where}", err=True)
        _more(page)
        return
    now = time.time()
    title = f"messages of queue {name}" + (f", group {group_id}" if group_id else "")
    table = Table(title=title, title_justify="left", box=SIMPLE_HEAD)
    table.add_column("message", justify="right", no_wrap=True)
    if group_id is None:
        table.add_column("group", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("kind", no_wrap=True, overflow="ellipsis", max_width=20)
    for column in ("tries", "enqueued", "size"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("data", no_wrap=True, overflow="ellipsis", max_width=48)
    for info in page.items:
        cells: list[str | Text] = [str(info.message_id) + (" head" if info.is_head else "")]
        if group_id is None:
            cells.append(Text(info.group_id))
        table.add_row(
            *cells,
            Text(info.kind),
            str(info.attempts),
            relative_text(info.enqueued_at, now),
            str(info.size),
            Text(_preview(info)),
        )
    Console().print(table)
    _more(page)


def _more(page: MessagePage) -> None:
    if page.next_after is not None:
        scanned = "" if len(page.items) else f" (this call looked at {SCAN_ROWS} messages)"
        click.echo(f"more messages may follow{scanned}: --after {page.next_after}", err=True)


@click.command(name="message")
@click.argument("message_id", metavar="ID", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
@common_options
def message(
    message_id: int, as_json: bool, url: str | None, queue: str | None, env_file: Path | None
) -> None:
    """Show message ID: its group, kind, whether it is its group's head, attempts, size and
    the start of its data; a scheduled one shows when it is due.

    Exits 1 when the queue holds no such message: settled (acked, dead-lettered) or unknown.
    `pgque history --message ID` tells what happened to it if the queue keeps history;
    `pgque dead-letters` lists the dead letters.

    \b
    Example:
      pgque message 42 --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        browsing = browsing_transport(transport)
        try:
            info = retrying(lambda: browsing.message(message_id), "message")
        except InvalidInput as exc:
            raise CliError(str(exc), 2) from exc
        name = transport.queue
    if info is None:
        raise CliError(
            f"queue {name!r} holds no message {message_id}: settled or unknown "
            "(see `pgque history --message` and `pgque dead-letters`)"
        )
    if as_json:
        click.echo(json.dumps(message_json(info), sort_keys=True))
        return
    now = time.time()
    if info.due_at is not None:
        where = f"scheduled, due {relative_text(info.due_at, now)} ({iso_utc(info.due_at)})"
    elif info.is_head:
        where = "the head of its group (delivered next, or in flight)"
    else:
        where = "waiting behind its group's head"
    lines = [
        f"message {info.message_id} of queue {name}",
        f"  group     {info.group_id}",
        f"  kind      {info.kind}",
        f"  event id  {info.event_id}",
        f"  where     {where}",
        f"  attempts  {info.attempts}",
        f"  enqueued  {relative_text(info.enqueued_at, now)} ({iso_utc(info.enqueued_at)})",
        f"  size      {info.size} bytes",
        f"  data      {_preview(info)}",
    ]
    for line in lines:
        click.echo(line)


COMMANDS = [messages, message]
