"""Operator commands on groups: ``groups``, ``group``, ``pause``, ``resume``.

``pgque group G`` ends with one plain sentence saying why the group is or is not moving
(:func:`explain`), the line an operator reads first.
"""

from __future__ import annotations

import json
import shlex
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
from pgque.core.cli._never_used import refuse_never_used
from pgque.core.cli._ops import iso_utc, short_utc
from pgque.core.contract import SupportsFairness
from pgque.core.explain import clock_text as _clock
from pgque.core.explain import explain, ready_ahead
from pgque.core.explain import relative_text as _relative
from pgque.core.fairness import DEFAULT_KEY
from pgque.core.models import GROUP_STATES, GroupInfo, GroupStateName, KeyInfo
from pgque.core.validation import MAX_GROUPS_PAGE

__all__ = ["COMMANDS", "explain", "group_json", "ready_ahead"]


def group_json(info: GroupInfo) -> dict[str, Any]:
    """Return *info* as the JSON object ``pgque groups --json`` / ``group --json`` print.

    Every field of :class:`~pgque.core.GroupInfo`; times are ISO 8601 UTC strings.
    """
    out: dict[str, Any] = info.model_dump(mode="python")
    for key in ("head_enqueued_at", "lease_expires_at", "resume_at"):
        if out[key] is not None:
            out[key] = iso_utc(out[key])
    if info.last_error is not None:
        out["last_error"]["at"] = iso_utc(info.last_error.at)
    return out


def _note(info: GroupInfo, now: float) -> str:
    """The short last column of ``pgque groups``: who, until when, or what failed."""
    if info.state == "leased":
        return info.lease_holder or "-"
    if info.state == "parked" and info.resume_at is not None:
        return f"until {_clock(info.resume_at, now).removesuffix(' UTC')}"
    if info.last_error is not None:
        return info.last_error.summary()
    if info.lease_expires_at is not None:
        return "lease expired"
    return ""


#: The widths of the fixed columns of ``pgque groups``.
_FIXED = {"state": 7, "depth": 5, "tries": 5, "age": 5}
_GROUP_WIDTH = 20


def _short_age(seconds: float) -> str:
    """A head's age in at most 5 characters: ``41s``, ``12m``, ``3.5h``, ``12d``."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.0f}d"


@click.group(name="groups", invoke_without_command=True)
@click.option(
    "--state",
    type=click.Choice(GROUP_STATES),
    default=None,
    help="Only groups in this state.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_GROUPS_PAGE),
    default=100,
    show_default=True,
    help="At most this many groups.",
)
@click.option(
    "--after",
    default=None,
    metavar="GROUP",
    help="Start after this group id (the last one of the previous page).",
)
@click.option(
    "--prefix",
    default=None,
    metavar="TEXT",
    help="Only groups whose id starts with TEXT (a range of ids, never a scan).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@common_options
@click.pass_context
def groups(
    ctx: click.Context,
    state: GroupStateName | None,
    limit: int,
    after: str | None,
    prefix: str | None,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """List a queue's groups in byte order of id, with their state, depth and head.

    Columns: the group, its state, depth (messages), tries (the head's attempts so far), age
    (of the head) and a note: who holds its lease, until when it is parked, or its last error.

    A page holds --limit groups; pass the last id of a page as --after for the next one.
    With --prefix, only the groups whose id starts with it (tenant-42:, order-).
    `pgque group GROUP` explains one of them; `pgque groups retry-now GROUP` ends the retry
    delay a parked group waits out.

    \b
    Example:
      pgque groups --state blocked --url postgresql://localhost/app
    """
    if ctx.invoked_subcommand is not None:
        return  # a subcommand (retry-now) does the work
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        page = retrying(
            lambda: transport.groups(state=state, limit=limit, after=after, prefix=prefix),
            "groups",
        )
        name = transport.queue
        if not page:
            refuse_never_used(transport, config)
    if as_json:
        for info in page:
            click.echo(json.dumps(group_json(info), sort_keys=True))
        return
    if not page:
        where = f" in state {state}" if state else ""
        where += f" starting with {prefix!r}" if prefix else ""
        after_text = f" after {after!r}" if after is not None else ""
        click.echo(f"no groups{where}{after_text}", err=True)
        return
    now = time.time()
    title = f"groups of queue {name}" + (f" in state {state}" if state else "")
    console = Console()
    table = Table(title=title, title_justify="left", box=SIMPLE_HEAD)
    # Identifiers never wrap: a group id too long for its column ends in an ellipsis (--json
    # and `pgque group` have it whole); the note takes what is left of the console's width
    # (80 columns when it is not a terminal). Each column costs 3 more (padding and rule).
    columns = len(_FIXED) + 2
    taken = sum(_FIXED.values()) + _GROUP_WIDTH + 3 * columns + 1
    room = max(10, console.width - taken)
    table.add_column("group", no_wrap=True, overflow="ellipsis", max_width=_GROUP_WIDTH)
    table.add_column("state", no_wrap=True, min_width=_FIXED["state"])
    for column in ("depth", "tries", "age"):
        table.add_column(column, justify="right", no_wrap=True, min_width=_FIXED[column])
    table.add_column("note", no_wrap=True, overflow="ellipsis", max_width=room)
    for info in page:
        head_age = (
            "-"
            if info.head_enqueued_at is None
            else _short_age(max(now - info.head_enqueued_at, 0.0))
        )
        style = "bold red" if info.state == "blocked" else None
        table.add_row(
            Text(info.group_id),
            info.state,
            str(info.depth),
            str(info.head_attempts),
            head_age,
            Text(_note(info, now)),
            style=style,
        )
    console.print(table)
    if len(page) == limit:
        click.echo(f"more groups may follow: --after {shlex.quote(page[-1].group_id)}", err=True)


@groups.command(name="retry-now")
@click.argument("group_id", metavar="GROUP")
@common_options
def retry_now(group_id: str, url: str | None, queue: str | None, env_file: Path | None) -> None:
    """End the retry delay GROUP waits out: its head is claimable at once.

    For when the cause of the failure is fixed: the head keeps its attempt count and last
    error. Exits 1 if the group is not waiting for a retry (absent, ready, leased, blocked:
    `pgque unblock` releases a blocked one).

    \b
    Example:
      pgque groups retry-now invoice-9 --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        info = retrying(lambda: transport.group(group_id), "group")
        done = retrying(lambda: transport.retry_now(group_id), "retry-now")
        name = transport.queue
    if not done:
        state = "absent" if info is None else info.state
        raise CliError(
            f"group {group_id!r} of queue {name!r} is not waiting for a retry (it is {state})"
        )
    head_id = None if info is None else info.head_message_id
    head = "" if head_id is None else f" (message {head_id})"
    click.echo(f"{group_id}: its head{head} is claimable now, its attempts and last error kept")


@click.command(name="group")
@click.argument("group_id", metavar="GROUP")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
@common_options
def group(
    group_id: str, as_json: bool, url: str | None, queue: str | None, env_file: Path | None
) -> None:
    """Show everything about GROUP, ending with why it is or is not moving.

    Exits 1 if the queue has no such group (no messages and not paused).

    \b
    Example:
      pgque group tenant-42 --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        info = retrying(lambda: transport.group(group_id), "group")
        name = transport.queue
        if info is None:
            refuse_never_used(transport, config)
        ahead = None
        key: KeyInfo | None = None
        if info is not None and info.state == "ready":
            ahead = ready_ahead(retrying(transport.stats, "stats"))
            if transport.capabilities.fairness and isinstance(transport, SupportsFairness):
                fair = transport
                name_of_key = info.fairness_key or DEFAULT_KEY
                key = retrying(lambda: fair.key_info(name_of_key), "key_info")
    if info is None:
        raise CliError(
            f"queue {name!r} has no group {group_id!r} (no messages and not paused; "
            "`pgque groups` lists them)"
        )
    now = time.time()
    sentence = explain(info, now=now, ahead=ahead, key=key)
    if as_json:
        click.echo(json.dumps({"queue": name, **group_json(info), "why": sentence}, sort_keys=True))
        return
    Console().print(_group_table(info, name, now))
    error = info.last_error
    if error is not None and error.traceback:
        click.echo("traceback of the last error:")
        click.echo(error.traceback.rstrip("\n"))
        click.echo("")
    click.echo(sentence)


def _at(epoch: float | None, now: float) -> str:
    if epoch is None:
        return "-"
    return f"{short_utc(epoch)} ({_relative(epoch, now)})"


def _group_table(info: GroupInfo, queue: str, now: float) -> Table:
    table = Table(
        title=f"group of queue {queue}", show_header=False, title_justify="left", box=SIMPLE_HEAD
    )
    table.add_column("field", no_wrap=True, style="dim")
    table.add_column("value", overflow="fold")
    error = info.last_error
    rows: list[tuple[str, str]] = [
        ("group", info.group_id),
        ("state", info.state),
        ("depth", str(info.depth)),
        ("priority", str(info.priority)),
        ("head message", "-" if info.head_message_id is None else str(info.head_message_id)),
        ("head enqueued", _at(info.head_enqueued_at, now)),
        ("head attempts", str(info.head_attempts)),
        ("lease holder", info.lease_holder or "-"),
        ("lease expires", _at(info.lease_expires_at, now)),
        ("resume at", _at(info.resume_at, now)),
        ("last error", "-" if error is None else error.summary()),
        ("last error at", "-" if error is None else _at(error.at, now)),
    ]
    for field, value in rows:
        table.add_row(field, Text(value))
    return table


@click.command(name="pause")
@click.argument("group_id", metavar="GROUP")
@common_options
def pause(group_id: str, url: str | None, queue: str | None, env_file: Path | None) -> None:
    """Hold GROUP: no claim leases it until `pgque resume GROUP`.

    A lease already out finishes normally; publishes still append. A group that does not
    exist yet is created paused, so a tenant can be held before its messages arrive.

    \b
    Example:
      pgque pause tenant-42 --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        paused = retrying(lambda: transport.pause(group_id), "pause")
    if paused:
        click.echo(
            f"paused {group_id}: no claim leases it until `pgque resume {shlex.quote(group_id)}`"
        )
    else:
        click.echo(f"{group_id} was already paused")


@click.command(name="resume")
@click.argument("group_id", metavar="GROUP")
@common_options
def resume(group_id: str, url: str | None, queue: str | None, env_file: Path | None) -> None:
    """Lift the hold of `pgque pause` on GROUP; its messages are claimed again.

    Exits 1 if the group is not paused.

    \b
    Example:
      pgque resume tenant-42 --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        resumed = retrying(lambda: transport.resume(group_id), "resume")
        name = transport.queue
    if not resumed:
        raise CliError(f"group {group_id!r} is not paused in queue {name!r}")
    click.echo(f"resumed {group_id}")


COMMANDS: list[click.Command] = [groups, group, pause, resume]
