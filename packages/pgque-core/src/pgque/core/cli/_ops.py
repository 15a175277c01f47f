"""Operator commands: ``publish``, ``queues``, ``stats``, ``dead-letters``, ``unblock``.

The commands on single groups (``groups``, ``group``, ``pause``, ``resume``) are in _groups.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
from rich.box import SIMPLE_HEAD
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pgque.core.cli._config import Config, resolve_config
from pgque.core.cli._conflicts import retrying
from pgque.core.cli._connecting import open_transport
from pgque.core.cli._errors import CliError
from pgque.core.cli._flags import common_options, connect_timeout_option
from pgque.core.cli._never_used import refuse_never_used
from pgque.core.cli._when import delay_until, parse_at, parse_delay
from pgque.core.contract import SupportsQueues, Transport
from pgque.core.explain import age_text
from pgque.core.models import DeadLetter, Event, QueueStats

__all__ = ["COMMANDS", "iso_utc", "age_text", "short_utc", "stats_json", "dead_letter_json"]


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
            raise CliError(f"--header must be KEY=VALUE, not {pair!r}", 2)
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
@click.option(
    "--delay",
    default=None,
    metavar="DURATION",
    callback=lambda _ctx, _param, value: None if value is None else parse_delay(value),
    help="Schedule the message: it joins GROUP after this long (30s, 5m, 2h, 1d, or seconds).",
)
@click.option(
    "--at",
    "at_text",
    default=None,
    metavar="TIME",
    callback=lambda _ctx, _param, value: None if value is None else parse_at(value),
    help="Schedule the message: it joins GROUP at this time, ISO 8601 with a zone "
    "(2026-12-24T09:00Z).",
)
@click.option(
    "--fairness-key",
    default=None,
    metavar="KEY",
    help="The tenant GROUP belongs to (fixed by its first message while it has messages; "
    "docs/fairness.md).",
)
@common_options
def publish(
    group: str,
    kind: str,
    data_json: str,
    priority: int,
    header: tuple[str, ...],
    event_id: str | None,
    delay: float | None,
    at_text: datetime | None,
    fairness_key: str | None,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Append one event to GROUP's tail and print its message id.

    DATA_JSON is the event's payload as JSON ('-' reads it from stdin; default {}). With
    --delay or --at the message is scheduled: it joins GROUP's tail when due, with the id
    printed; `pgque scheduled` lists it and `pgque cancel ID` drops it until then.

    \b
    Example:
      pgque publish order-42 order.paid '{"amount": 12.5}' --url postgresql://localhost/app
      pgque publish order-42 order.remind --delay 2h --url postgresql://localhost/app
    """
    if delay is not None and at_text is not None:
        raise CliError("--delay and --at exclude each other: give one", 2)
    config = resolve_config(url, queue, env_file)
    data = _parse_json(data_json, "DATA_JSON")
    fields: dict[str, Any] = {"kind": kind, "data": data, "headers": _parse_headers(header)}
    if event_id is not None:
        fields["id"] = event_id
    event = Event(**fields)
    with open_transport(config) as transport:
        wait = delay or 0.0
        if at_text is not None:
            wait = delay_until(transport, at_text)
        message_id = retrying(
            lambda: transport.publish(
                group, event, priority=priority, delay=wait, fairness_key=fairness_key
            ),
            "publish",
        )
    click.echo(message_id)
    if config.scheme == "memory":
        click.echo(
            "pgque: warning: a memory:// queue lives only in this process; the message is "
            "gone now that this command ends (use a postgresql:// or redis:// URL)",
            err=True,
        )


def iso_utc(moment: float | datetime) -> str:
    """Return *moment* (epoch seconds or an aware datetime) as ISO 8601 UTC with microseconds.

    The one timestamp format of every JSON the command line prints:
    ``2026-01-31T12:00:00.000000+00:00`` (what ``datetime.isoformat`` writes and
    ``datetime.fromisoformat`` reads back, on every Python pgque supports). Raises nothing.
    """
    if isinstance(moment, datetime):
        when = moment.astimezone(timezone.utc)
    else:
        when = datetime.fromtimestamp(moment, timezone.utc)
    return when.isoformat(timespec="microseconds")


def short_utc(epoch: float) -> str:
    """Return *epoch* as ISO 8601 UTC to the second, for tables."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def stats_json(queue: str, stats: QueueStats) -> dict[str, Any]:
    """Return *stats* of *queue* as the JSON object ``pgque stats --json`` prints."""
    out: dict[str, Any] = {"queue": queue, **stats.model_dump()}
    if stats.next_resume_at is not None:
        out["next_resume_at"] = iso_utc(stats.next_resume_at)
    if stats.next_due_at is not None:
        out["next_due_at"] = iso_utc(stats.next_due_at)
    return out


def dead_letter_json(letter: DeadLetter) -> dict[str, Any]:
    """Return *letter* as the JSON object ``pgque dead-letters list --json`` prints."""
    out: dict[str, Any] = letter.model_dump(mode="python")
    out["failed_at"] = iso_utc(letter.failed_at)
    out["event"]["created_at"] = iso_utc(letter.event.created_at)
    if letter.error is not None:
        out["error"]["at"] = iso_utc(letter.error.at)
    return out


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    moment = short_utc(epoch)
    delta = epoch - time.time()
    relative = f"in {age_text(delta)}" if delta > 0 else "due now"
    return f"{moment} ({relative})"


def _stats_table(stats: QueueStats, queue: str, url: str) -> Table:
    table = Table(
        title=f"queue {queue} on {url}", show_header=True, title_justify="left", box=SIMPLE_HEAD
    )
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right", overflow="fold")
    table.add_column("meaning", style="dim", ratio=1)
    rows = [
        ("groups", str(stats.groups), "groups holding messages (or paused)"),
        ("messages", str(stats.messages), "messages stored (all groups)"),
        ("in flight", str(stats.in_flight), "groups leased by a worker now"),
        ("parked", str(stats.parked), "groups waiting for a retry delay"),
        ("blocked", str(stats.blocked), "groups waiting for `pgque unblock`"),
        ("paused", str(stats.paused), "groups held by `pgque pause`"),
        ("dead letters", str(stats.dead_letters), "see `pgque dead-letters list`"),
        ("oldest message", age_text(stats.oldest_age_s), "age of the oldest stored message"),
        ("next resume", _when(stats.next_resume_at), "when the first parked group resumes"),
        ("scheduled", str(stats.scheduled), "delayed messages not due yet"),
        ("next due", _when(stats.next_due_at), "when the first scheduled message is due"),
    ]
    for row in rows:
        style = "bold red" if row[0] == "blocked" and stats.blocked else None
        if row[0] == "paused" and stats.paused:
            style = "bold yellow"
        table.add_row(*row, style=style)
    return table


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@common_options
def stats(as_json: bool, url: str | None, queue: str | None, env_file: Path | None) -> None:
    """Show a queue's counts: groups, messages, in flight, parked, blocked, paused, dead letters.

    \b
    Example:
      pgque stats --url postgresql://localhost/app --queue orders
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        snapshot = retrying(transport.stats, "stats")
        name = transport.queue
        if not (snapshot.groups or snapshot.dead_letters or snapshot.scheduled):
            refuse_never_used(transport, config)
    if as_json:
        click.echo(json.dumps(stats_json(name, snapshot), sort_keys=True))
        return
    Console().print(_stats_table(snapshot, name, config.masked_url))


def _queue_names(transport: Transport) -> list[str] | None:
    """Return ``transport.queues()``, or None for a transport that cannot list queues."""
    if not isinstance(transport, SupportsQueues):
        return None
    return [str(name) for name in retrying(transport.queues, "queues")]


@click.command(name="queues")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@click.option(
    "--url",
    "-u",
    default=None,
    metavar="URL",
    help="Queue URL: postgresql://..., redis://..., memory:// [env PGQUE_URL].",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read PGQUE_* settings from this file instead of ./.env.",
)
@connect_timeout_option
def queues(as_json: bool, url: str | None, env_file: Path | None) -> None:
    """List every queue on the server with its counts (queues holding messages or dead letters).

    \b
    Example:
      pgque queues --url postgresql://localhost/app
    """
    config = resolve_config(url, None, env_file)
    rows: list[tuple[str, QueueStats]] = []
    with open_transport(config) as transport:
        names = _queue_names(transport)
        if names is None:
            raise CliError(f"the {config.scheme}:// transport cannot list its queues")
        for name in names:
            with open_transport(Config(config.url, {**config.options, "queue": name})) as one:
                rows.append((name, one.stats()))
    if as_json:
        for name, snapshot in rows:
            click.echo(json.dumps(stats_json(name, snapshot), sort_keys=True))
        return
    if not rows:
        click.echo("no queues hold messages or dead letters there", err=True)
        return
    table = Table(title=f"queues on {config.masked_url}", title_justify="left", box=SIMPLE_HEAD)
    # A name never wraps (a cut name reads as two queues); one too long for 80 columns ends in an
    # ellipsis, and --json has it whole.
    console = Console()
    counts = ("groups", "msgs", "leased", "parked", "blocked", "dead")
    # What the other columns take: their widths, 3 of padding and rule per column, the edges.
    fixed = sum(len(c) for c in counts) + 9 + 3 * (len(counts) + 2) + 2
    room = max(12, console.width - fixed)
    table.add_column("queue", no_wrap=True, overflow="ellipsis", max_width=room)
    for column in counts:
        table.add_column(column, justify="right", no_wrap=True, min_width=len(column))
    table.add_column("oldest", justify="right", no_wrap=True, min_width=9)
    for name, s in rows:
        values = (s.groups, s.messages, s.in_flight, s.parked, s.blocked, s.dead_letters)
        table.add_row(name, *(str(n) for n in values), age_text(s.oldest_age_s))
    console.print(table)


@click.group(name="dead-letters")
def dead_letters() -> None:
    """Inspect, redrive and delete messages that failed (rejected or out of attempts)."""


@dead_letters.command(name="list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option(
    "--after",
    type=int,
    default=None,
    metavar="ID",
    help="Start after this dead-letter id (the last one of the previous page).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@common_options
def dead_letters_list(
    limit: int,
    after: int | None,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """List dead letters, oldest first, with their reason and recorded error.

    `pgque dead-letters show ID` prints one whole, with its traceback.

    \b
    Example:
      pgque dead-letters list --url postgresql://localhost/app --limit 20
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        letters = retrying(lambda: transport.dead_letters(limit, after=after), "dead-letters list")
        name = transport.queue
        if not letters:
            refuse_never_used(transport, config)
    if as_json:
        for letter in letters:
            click.echo(json.dumps(dead_letter_json(letter), sort_keys=True))
        return
    if not letters:
        click.echo("no dead letters" + (f" after {after}" if after is not None else ""), err=True)
        return
    table = Table(title=f"dead letters of queue {name}", title_justify="left", box=SIMPLE_HEAD)
    # Identifiers never wrap (a cut "order.cr|eated" reads as two words): group and kind share
    # one cell, one per line, and end in an ellipsis when too long (--json has them whole).
    # Only the free-text reason wraps, between words, so the table fits 80 columns.
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("group / kind", no_wrap=True, overflow="ellipsis", max_width=26)
    table.add_column("tries", justify="right", no_wrap=True)
    table.add_column("failed at (UTC)", no_wrap=True)
    table.add_column("reason", ratio=1, min_width=16)
    for letter in letters:
        who = Text(letter.group_id + "\n") + Text(letter.event.kind, style="dim")
        why = Text(letter.reason)
        if letter.error is not None:
            why += Text("\n" + letter.error.summary(), style="dim")
        table.add_row(
            str(letter.id),
            who,
            str(letter.attempts),
            short_utc(letter.failed_at).replace("T", " ")[:16],
            why,
        )
    Console().print(table)
    if len(letters) == limit:
        click.echo(f"more dead letters may follow: --after {letters[-1].id}", err=True)


#: How much of a dead letter's data ``dead-letters show`` prints in its table.
SHOW_DATA_CHARS = 2000


def _find_dead_letter(transport: Transport, letter_id: int) -> DeadLetter | None:
    found = retrying(lambda: transport.dead_letters(1, after=letter_id - 1), "dead-letters show")
    return found[0] if found and found[0].id == letter_id else None


@dead_letters.command(name="show")
@click.argument("letter_id", metavar="ID", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
@common_options
def dead_letters_show(
    letter_id: int, as_json: bool, url: str | None, queue: str | None, env_file: Path | None
) -> None:
    """Show dead letter ID whole: its event, reason and the error stored with its traceback.

    Exits 1 if there is no such dead letter.

    \b
    Example:
      pgque dead-letters show 12 --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        letter = _find_dead_letter(transport, letter_id)
        name = transport.queue
        if letter is None:
            refuse_never_used(transport, config)
    if letter is None:
        raise CliError(
            f"queue {name!r} has no dead letter {letter_id} (`pgque dead-letters list` lists them)"
        )
    if as_json:
        click.echo(json.dumps(dead_letter_json(letter), sort_keys=True))
        return
    Console().print(_dead_letter_table(letter, name))
    error = letter.error
    if error is not None and error.traceback:
        click.echo("traceback:")
        click.echo(error.traceback.rstrip("\n"))
        click.echo("")
    click.echo(
        f"`pgque dead-letters redrive {letter.id}` returns it to group "
        f"{shlex.quote(letter.group_id)} in place; `pgque dead-letters delete {letter.id}` "
        "drops it"
    )


def _dead_letter_table(letter: DeadLetter, queue: str) -> Table:
    table = Table(
        title=f"dead letter {letter.id} of queue {queue}",
        show_header=False,
        title_justify="left",
        box=SIMPLE_HEAD,
    )
    table.add_column("field", no_wrap=True, style="dim")
    table.add_column("value", overflow="fold")
    data = json.dumps(letter.event.data, ensure_ascii=False, sort_keys=True)
    if len(data) > SHOW_DATA_CHARS:
        data = data[:SHOW_DATA_CHARS] + " ... (cut; --json has it whole)"
    error = letter.error
    rows = [
        ("group", letter.group_id),
        ("message id", str(letter.message_id)),
        ("kind", letter.event.kind),
        ("event id", letter.event.id),
        ("created at", iso_utc(letter.event.created_at)),
        ("headers", json.dumps(letter.event.headers, ensure_ascii=False, sort_keys=True)),
        ("data", data),
        ("priority", str(letter.priority)),
        ("attempts", str(letter.attempts)),
        ("reason", letter.reason),
        ("failed at", iso_utc(letter.failed_at)),
        ("error", "-" if error is None else error.summary()),
        ("error at", "-" if error is None else iso_utc(error.at)),
    ]
    if error is not None and "\n" in error.message:
        rows.insert(-1, ("error message", error.message))
    for field, value in rows:
        table.add_row(field, Text(value))
    return table


@dead_letters.command(name="redrive")
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "redrive_all", is_flag=True, help="Redrive every dead letter.")
@click.option(
    "--tail",
    is_flag=True,
    help="Re-publish at the tail of the group with a new message id, instead of in place.",
)
@click.option(
    "--retry-now",
    is_flag=True,
    help="End the retry delay of a group the dead letters go back to (claimable at once).",
)
@common_options
def dead_letters_redrive(
    ids: tuple[int, ...],
    redrive_all: bool,
    tail: bool,
    retry_now: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Return dead letters IDS (or --all) to their groups, in place.

    In place, a dead letter goes back with its original message id, ahead of every later
    message of its group not yet delivered, and starts again at attempt 1: the group's order
    is what it would have been without the failure; it keeps its error as its last error. A
    group waiting out a retry delay keeps waiting, unless --retry-now. With --tail it is
    published anew at the group's tail instead. Unknown ids are ignored; prints how many were
    redriven.

    \b
    Example:
      pgque dead-letters redrive 12 13 --url postgresql://localhost/app
    """
    if bool(ids) == redrive_all:
        raise CliError("give dead-letter IDS or --all (not both)", 2)
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        chosen = None if redrive_all else list(ids)
        count = retrying(
            lambda: transport.redrive(chosen, in_place=not tail, retry_now=retry_now), "redrive"
        )
    letters = f"{count} dead letter{'s' if count != 1 else ''}"
    if tail:
        click.echo(f"re-published {letters} at the tail")
    else:
        click.echo(f"redrove {letters} in place")


@dead_letters.command(name="delete")
@click.argument("ids", nargs=-1, type=int, required=True)
@common_options
def dead_letters_delete(
    ids: tuple[int, ...], url: str | None, queue: str | None, env_file: Path | None
) -> None:
    """Delete dead letters IDS for good; prints how many were deleted.

    Exits 1 if none of them existed.

    \b
    Example:
      pgque dead-letters delete 12 13 --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        count = retrying(lambda: transport.delete_dead_letters(list(ids)), "dead-letters delete")
        name = transport.queue
    if count == 0:
        raise CliError(f"queue {name!r} has none of these dead letters")
    wanted = len(set(ids))
    missing = "" if count == wanted else f" ({wanted - count} of the ids did not exist)"
    click.echo(f"deleted {count} dead letter{'s' if count != 1 else ''}{missing}")


@click.command()
@click.argument("group")
@click.option(
    "--drop-head",
    is_flag=True,
    help="Dead-letter the failing head instead of retrying it.",
)
@click.option(
    "--head",
    type=click.IntRange(min=1),
    default=None,
    metavar="ID",
    help="Act only if message ID is still the group's head (as `pgque group` showed it).",
)
@common_options
def unblock(
    group: str,
    drop_head: bool,
    head: int | None,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Release GROUP, blocked after its head exhausted max_attempts (on_exhausted=block).

    The head is retried with a fresh attempt count, or dead-lettered with --drop-head; the
    answer names the message. With --head ID it acts only if message ID is still the head
    (refused, exit 1, when the head changed since you looked); without it, on the head it
    reads first. Exits 1 if the group is not blocked.

    \b
    Example:
      pgque unblock order-42 --head 1207 --drop-head --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        name = transport.queue
        # (A paused group shows as paused, blocked or not: unblock itself says which.)
        info = retrying(lambda: transport.group(group), "group")
        seen = None if info is None else info.head_message_id
        target = head if head is not None else seen
        released = retrying(
            lambda: transport.unblock(group, drop_head=drop_head, head=target), "unblock"
        )
        if not released:
            now = retrying(lambda: transport.group(group), "group")
            if now is None or target is None or now.head_message_id == target:
                raise CliError(f"group {group!r} is not blocked in queue {name!r}")
            raise CliError(
                f"refused: the head of {group!r} is message {now.head_message_id}, not {target}"
                f" (look again with `pgque group {shlex.quote(group)}`); nothing was changed"
            )
    if drop_head:
        click.echo(f"unblocked {group}: message {target} moved to the dead letters")
    else:
        click.echo(f"unblocked {group}: message {target} will be retried (attempts reset)")


COMMANDS: list[click.Command] = [publish, queues, stats, dead_letters, unblock]
