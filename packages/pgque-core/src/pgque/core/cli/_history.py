"""Job history on the command line: ``history`` lists a queue's records, a message's story, or
sets the queue's history (docs/history.md)."""

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

from pgque.core.cli._config import resolve_config
from pgque.core.cli._conflicts import retrying
from pgque.core.cli._connecting import open_transport
from pgque.core.cli._errors import CliError
from pgque.core.cli._flags import common_options
from pgque.core.cli._ops import iso_utc
from pgque.core.cli._when import parse_at, parse_delay
from pgque.core.contract import SupportsHistory, Transport
from pgque.core.errors import InvalidInput
from pgque.core.explain import age_text, relative_text
from pgque.core.history import MAX_HISTORY_PAGE, check_history_option, history_option_text
from pgque.core.models import HISTORY_OUTCOMES, HistoryRecord

__all__ = ["COMMANDS", "record_json"]


def _kept(transport: Transport) -> SupportsHistory:
    """The transport as one with job history; CliError when its backend has none."""
    if not transport.capabilities.history or not isinstance(transport, SupportsHistory):
        raise CliError(
            "this backend does not keep job history (docs/history.md lists the ones that do)"
        )
    return transport


def record_json(record: HistoryRecord) -> dict[str, Any]:
    """*record* as the JSON object ``pgque history --json`` prints; times ISO 8601 UTC."""
    out: dict[str, Any] = record.model_dump(mode="json")
    out["duration"] = record.duration
    for name in ("published_at", "started_at", "finished_at"):
        value = getattr(record, name)
        out[name] = None if value is None else iso_utc(value)
    return out


def _since(text: str | None, now: float) -> float | None:
    """``--since``: a duration ago (``15m``, ``2h``, ``7d``) or an ISO 8601 time with a zone."""
    if text is None:
        return None
    if text[:1].isdigit() and "-" not in text and ":" not in text:
        return now - parse_delay(text)
    return parse_at(text).timestamp()


def _error_text(record: HistoryRecord) -> str:
    if record.error is None:
        return record.reason or ""
    text = f"{record.error.type}: {record.error.message}"
    return f"{record.reason}; {text}" if record.reason else text


@click.command(name="history")
@click.option("--group", default=None, help="Only this group's records.")
@click.option("--kind", default=None, help="Only messages of this event kind.")
@click.option(
    "--outcome",
    type=click.Choice(HISTORY_OUTCOMES),
    default=None,
    help="Only records with this outcome.",
)
@click.option("--message", "message_id", type=int, default=None, help="One message's story.")
@click.option(
    "--since",
    default=None,
    metavar="WHEN",
    help="Only records finished since WHEN: a duration ago (15m, 2h, 7d) or an ISO 8601 time.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_HISTORY_PAGE),
    default=50,
    show_default=True,
    help="At most this many records.",
)
@click.option("--after", type=int, default=None, metavar="ID", help="Records older than record ID.")
@click.option(
    "--set",
    "setting",
    default=None,
    metavar="RETENTION",
    help="Turn the queue's history on (7d, 1000000 rows, 7d,1000000) or off, then stop.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@common_options
def history(
    group: str | None,
    kind: str | None,
    outcome: str | None,
    message_id: int | None,
    since: str | None,
    limit: int,
    after: int | None,
    setting: str | None,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Show what happened to a queue's messages, newest first: each settled delivery (acked,
    nacked, released, dead_lettered), each head exhausted by max_attempts and each redrive,
    with its attempt, worker, duration and error.

    The queue's history must be on (--set 7d, or the transport option history). A page holds
    --limit records; pass the last record's id as --after for the next one.

    \b
    Examples:
      pgque history --set 7d --url postgresql://localhost/app
      pgque history --message 42 --url postgresql://localhost/app
      pgque history --group order-42 --since 2h --outcome nacked --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    if setting is not None:
        try:
            checked = check_history_option(setting)
        except InvalidInput as exc:
            raise CliError(f"--set: {exc}", 2) from exc
        assert checked is not None  # a str is never "not given"
        with open_transport(config) as transport:
            kept = _kept(transport)
            retrying(lambda: kept.set_history(checked), "history")
        click.echo(f"history of queue {transport.queue}: {history_option_text(checked)}")
        return
    now = time.time()
    with open_transport(config) as transport:
        kept = _kept(transport)
        try:
            page = retrying(
                lambda: kept.history(
                    group=group,
                    kind=kind,
                    since=_since(since, now),
                    outcome=outcome,  # type: ignore[arg-type]  # a click.Choice of them
                    message_id=message_id,
                    limit=limit,
                    after=after,
                ),
                "history",
            )
        except InvalidInput as exc:
            raise CliError(str(exc), 2) from exc
    if as_json:
        for record in page:
            click.echo(json.dumps(record_json(record), sort_keys=True))
        _more(page, limit)
        return
    if not page:
        click.echo(
            "no history records" + (f" after {after}" if after is not None else ""), err=True
        )
        return
    table = Table(
        title=f"history of queue {transport.queue}", title_justify="left", box=SIMPLE_HEAD
    )
    for column in ("id", "finished", "message", "attempt", "took"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("group", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("kind", no_wrap=True, overflow="ellipsis", max_width=20)
    table.add_column("outcome", no_wrap=True)
    table.add_column("worker", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("error", overflow="ellipsis", max_width=48, no_wrap=True)
    for record in page:
        took = "-" if record.duration is None else age_text(record.duration)
        table.add_row(
            str(record.id),
            relative_text(record.finished_at, now),
            str(record.message_id),
            str(record.attempt),
            took,
            Text(record.group_id),
            Text(record.kind),
            record.outcome,
            Text(record.worker or "-"),
            Text(_error_text(record)),
            style="red" if record.outcome in ("dead_lettered", "exhausted") else None,
        )
    Console().print(table)
    _more(page, limit)


def _more(page: list[HistoryRecord], limit: int) -> None:
    if len(page) == limit:
        click.echo(f"more records may follow: --after {page[-1].id}", err=True)


COMMANDS = [history]
