"""Operator commands: ``publish``, ``stats``, ``dead-letters list|redrive``, ``unblock``."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from pgque.core.cli._common import (
    CliError,
    common_options,
    open_transport,
    resolve_config,
    retrying,
)
from pgque.core.models import Event, QueueStats

__all__ = ["COMMANDS"]


def _parse_json(text: str, what: str) -> Any:
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{what} is not valid JSON: {exc}") from exc


def _parse_headers(pairs: tuple[str, ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--header must be KEY=VALUE, not {pair!r}")
        headers[key] = value
    return headers


@click.command()
@click.argument("group")
@click.argument("kind")
@click.argument("data_json", required=False, default="{}", metavar="[DATA_JSON]")
@click.option(
    "--priority",
    "-p",
    type=click.IntRange(0, 4),
    default=0,
    show_default=True,
    help="Group priority 0-4 (fixed by the group's first message while it has messages).",
)
@click.option("--header", "-H", multiple=True, metavar="KEY=VALUE", help="Add a header (repeat).")
@click.option("--event-id", default=None, help="The event id (default: a random one).")
@common_options
def publish(
    group: str,
    kind: str,
    data_json: str,
    priority: int,
    header: tuple[str, ...],
    event_id: str | None,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Append one event to GROUP's tail and print its message id.

    DATA_JSON is the event's payload as JSON ('-' reads it from stdin; default {}).

    \b
    Example:
      pgque publish order-42 order.paid '{"amount": 12.5}' --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    data = _parse_json(data_json, "DATA_JSON")
    fields: dict[str, Any] = {"kind": kind, "data": data, "headers": _parse_headers(header)}
    if event_id is not None:
        fields["id"] = event_id
    event = Event(**fields)
    with open_transport(config) as transport:
        message_id = retrying(lambda: transport.publish(group, event, priority=priority), "publish")
    click.echo(message_id)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    moment = datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")
    delta = epoch - time.time()
    relative = f"in {_age(delta)}" if delta > 0 else "due now"
    return f"{moment} ({relative})"


def _stats_table(stats: QueueStats, queue: str, url: str) -> Table:
    table = Table(title=f"queue {queue} on {url}", show_header=True, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("meaning", style="dim")
    rows = [
        ("groups", str(stats.groups), "groups holding messages"),
        ("messages", str(stats.messages), "messages stored (all groups)"),
        ("in flight", str(stats.in_flight), "groups leased by a worker now"),
        ("parked", str(stats.parked), "groups waiting for a retry delay"),
        ("blocked", str(stats.blocked), "groups waiting for `pgque unblock`"),
        ("dead letters", str(stats.dead_letters), "see `pgque dead-letters list`"),
        ("oldest message", _age(stats.oldest_age_s), "age of the oldest stored message"),
        ("next resume", _when(stats.next_resume_at), "when the first parked group resumes"),
    ]
    for row in rows:
        style = "bold red" if row[0] == "blocked" and stats.blocked else None
        table.add_row(*row, style=style)
    return table


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@common_options
def stats(as_json: bool, url: str | None, queue: str | None, env_file: Path | None) -> None:
    """Show a queue's counts: groups, messages, in flight, parked, blocked, dead letters.

    \b
    Example:
      pgque stats --url postgresql://localhost/app --queue orders
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        snapshot = retrying(transport.stats, "stats")
        name = transport.queue
    if as_json:
        click.echo(json.dumps({"queue": name, **snapshot.model_dump()}, sort_keys=True))
        return
    Console().print(_stats_table(snapshot, name, config.masked_url))


@click.group(name="dead-letters")
def dead_letters() -> None:
    """Inspect and re-publish messages that failed too often."""


@dead_letters.command(name="list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@common_options
def dead_letters_list(
    limit: int, as_json: bool, url: str | None, queue: str | None, env_file: Path | None
) -> None:
    """List dead letters, oldest first.

    \b
    Example:
      pgque dead-letters list --url postgresql://localhost/app --limit 20
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        letters = retrying(lambda: transport.dead_letters(limit), "dead-letters list")
        name = transport.queue
    if as_json:
        for letter in letters:
            click.echo(letter.model_dump_json())
        return
    table = Table(title=f"dead letters of queue {name}", title_justify="left")
    for column in ("id", "group", "message", "kind", "prio", "attempts", "failed at", "reason"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        table.add_row(
            str(letter.id),
            letter.group_id,
            str(letter.message_id),
            letter.event.kind,
            str(letter.priority),
            str(letter.attempts),
            datetime.fromtimestamp(letter.failed_at, timezone.utc).isoformat(timespec="seconds"),
            letter.reason,
        )
    Console().print(table)
    if not letters:
        click.echo("no dead letters", err=True)


@dead_letters.command(name="redrive")
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "redrive_all", is_flag=True, help="Re-publish every dead letter.")
@common_options
def dead_letters_redrive(
    ids: tuple[int, ...],
    redrive_all: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Re-publish dead letters IDS (or --all) at the tail of their groups.

    Unknown ids are ignored; prints how many were re-published.

    \b
    Example:
      pgque dead-letters redrive 12 13 --url postgresql://localhost/app
    """
    if bool(ids) == redrive_all:
        raise CliError("give dead-letter IDS or --all (not both)", 2)
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        chosen = None if redrive_all else list(ids)
        count = retrying(lambda: transport.redrive(chosen), "redrive")
    click.echo(f"re-published {count} dead letter{'s' if count != 1 else ''}")


@click.command()
@click.argument("group")
@click.option(
    "--drop-head",
    is_flag=True,
    help="Dead-letter the failing head instead of retrying it.",
)
@common_options
def unblock(
    group: str, drop_head: bool, url: str | None, queue: str | None, env_file: Path | None
) -> None:
    """Release GROUP, blocked after its head exhausted max_attempts (on_exhausted=block).

    The head is retried with a fresh attempt count, or dead-lettered with --drop-head.
    Exits 1 if the group is not blocked.

    \b
    Example:
      pgque unblock order-42 --drop-head --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        released = retrying(lambda: transport.unblock(group, drop_head=drop_head), "unblock")
        name = transport.queue
    if not released:
        raise CliError(f"group {group!r} is not blocked in queue {name!r}")
    action = "dead-lettered its head" if drop_head else "its head will be retried"
    click.echo(f"unblocked {group}: {action}")


COMMANDS: list[click.Command] = [publish, stats, dead_letters, unblock]
