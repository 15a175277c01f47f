"""``pgque bulk``: pause, resume, retry-now, redrive and delete many items at once.

Each command selects by a list (``--group`` / ``--id``, repeated) and/or a filter, and first
shows what it would touch: without ``--yes`` it changes nothing (a dry run) and prints how
many items match and which. With ``--yes`` the same selection is read again by the call that
acts, bounded by ``--limit`` (at most 1,000 per call, ``pgque.core.MAX_BULK``).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pgque.core.bulk import MAX_BULK, BulkResult
from pgque.core.cli._config import resolve_config
from pgque.core.cli._conflicts import retrying
from pgque.core.cli._connecting import open_transport
from pgque.core.cli._errors import CliError
from pgque.core.cli._flags import common_options
from pgque.core.cli._never_used import refuse_never_used
from pgque.core.contract import Transport
from pgque.core.errors import InvalidInput
from pgque.core.models import GROUP_STATES, GroupStateName

__all__ = ["COMMANDS"]

#: How many ids a preview or a report lists before "and N more".
SHOWN_IDS = 20

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T", str, int)


@click.group(name="bulk")
def bulk() -> None:
    """Act on many groups or dead letters at once, chosen by a list or a filter.

    Without --yes a command only shows what it would change (how many match, and which);
    with --yes it acts, re-reading the selection as it does. One call acts on at most
    --limit items (1,000 at most); `--after` goes on where a call stopped.
    """


def _group_options(command: F) -> F:
    for decorator in reversed(
        [
            click.option(
                "--group",
                "group_ids",
                multiple=True,
                metavar="GROUP",
                help="Select this group (repeat); with a filter, only if it passes it.",
            ),
            click.option(
                "--state", type=click.Choice(GROUP_STATES), default=None, help="Filter by state."
            ),
            click.option(
                "--key",
                default=None,
                metavar="KEY",
                help="Filter by fairness key ('' for the groups published without one).",
            ),
            click.option(
                "--prefix",
                default=None,
                metavar="TEXT",
                help="Filter by group id prefix ('' for every group).",
            ),
            click.option(
                "--after",
                default=None,
                metavar="GROUP",
                help="Start after this group id (where the previous call stopped).",
            ),
            *_shared_options(),
        ]
    ):
        command = decorator(command)
    return command


def _shared_options() -> list[Callable[[F], F]]:
    return [
        click.option(
            "--limit",
            type=click.IntRange(1, MAX_BULK),
            default=MAX_BULK,
            show_default=True,
            help="Act on at most this many.",
        ),
        click.option("--yes", is_flag=True, help="Act; without it, only show what would change."),
        click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
    ]


def _listed(ids: list[T]) -> str:
    shown = ", ".join(str(item) for item in ids[:SHOWN_IDS])
    more = len(ids) - SHOWN_IDS
    return shown + (f" and {more} more" if more > 0 else "")


def _report(result: BulkResult[T], noun: str, verb: str, done: str, queue: str) -> None:
    plural = noun if result.matched == 1 else f"{noun}s"
    if result.dry_run:
        if result.matched == 0:
            click.echo(f"no {noun}s of queue {queue} match", err=True)
        else:
            click.echo(f"{result.matched} {plural} of queue {queue} match: {_listed(result.ids)}")
            click.echo(f"nothing changed: run again with --yes to {verb} them", err=True)
    else:
        click.echo(f"{done} {result.changed} of {result.matched} matching {plural}")
    if result.next_after is not None:
        after = shlex.quote(str(result.next_after))
        click.echo(f"more may match after this call's bound: --after {after}", err=True)


def _run_groups(
    verb: str,
    done: str,
    act: Callable[[Transport, dict[str, Any]], BulkResult[str]],
    *,
    group_ids: tuple[str, ...],
    state: GroupStateName | None,
    key: str | None,
    prefix: str | None,
    after: str | None,
    limit: int,
    yes: bool,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    if not group_ids and state is None and key is None and prefix is None:
        raise CliError(
            "give --group GROUP or a filter: --state, --key or --prefix ('' for every group)", 2
        )
    config = resolve_config(url, queue, env_file)
    selection: dict[str, Any] = {
        "group_ids": list(group_ids) or None,
        "state": state,
        "key": key,
        "prefix": prefix,
        "limit": limit,
        "after": after,
        "dry_run": not yes,
    }
    with open_transport(config) as transport:
        result = _checked(lambda: retrying(lambda: act(transport, selection), f"bulk {verb}"))
        name = transport.queue
        if result.matched == 0:
            refuse_never_used(transport, config)  # a mistyped queue is not "nothing matches"
    if as_json:
        click.echo(json.dumps({"queue": name, **result.model_dump()}, sort_keys=True))
        return
    _report(result, "group", verb, done, name)


def _checked(call: Callable[[], BulkResult[T]]) -> BulkResult[T]:
    try:
        return call()
    except InvalidInput as exc:
        raise CliError(str(exc), 2) from exc


@bulk.command(name="pause")
@_group_options
@common_options
def bulk_pause(
    group_ids: tuple[str, ...],
    state: GroupStateName | None,
    key: str | None,
    prefix: str | None,
    after: str | None,
    limit: int,
    yes: bool,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Pause the groups chosen by --group and/or a filter (--state, --key, --prefix).

    Only groups that exist are paused (a group listed with --group that does not exist is
    left out). Prints how many matched and how many were paused (a paused one is not counted).

    \b
    Example:
      pgque bulk pause --prefix tenant-42: --yes --url postgresql://localhost/app
    """
    _run_groups(
        "pause",
        "paused",
        lambda t, s: t.bulk_pause(**s),
        group_ids=group_ids,
        state=state,
        key=key,
        prefix=prefix,
        after=after,
        limit=limit,
        yes=yes,
        as_json=as_json,
        url=url,
        queue=queue,
        env_file=env_file,
    )


@bulk.command(name="resume")
@_group_options
@common_options
def bulk_resume(
    group_ids: tuple[str, ...],
    state: GroupStateName | None,
    key: str | None,
    prefix: str | None,
    after: str | None,
    limit: int,
    yes: bool,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Resume the chosen groups; only paused ones change.

    \b
    Example:
      pgque bulk resume --state paused --yes --url postgresql://localhost/app
    """
    _run_groups(
        "resume",
        "resumed",
        lambda t, s: t.bulk_resume(**s),
        group_ids=group_ids,
        state=state,
        key=key,
        prefix=prefix,
        after=after,
        limit=limit,
        yes=yes,
        as_json=as_json,
        url=url,
        queue=queue,
        env_file=env_file,
    )


@bulk.command(name="retry-now")
@_group_options
@common_options
def bulk_retry_now(
    group_ids: tuple[str, ...],
    state: GroupStateName | None,
    key: str | None,
    prefix: str | None,
    after: str | None,
    limit: int,
    yes: bool,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """End the retry delay of the chosen groups: their heads are claimable at once.

    Only groups waiting out a delay change (`--state parked` chooses exactly those); each
    head keeps its attempt count and last error.

    \b
    Example:
      pgque bulk retry-now --state parked --yes --url postgresql://localhost/app
    """
    _run_groups(
        "retry",
        "retried now",
        lambda t, s: t.bulk_retry_now(**s),
        group_ids=group_ids,
        state=state,
        key=key,
        prefix=prefix,
        after=after,
        limit=limit,
        yes=yes,
        as_json=as_json,
        url=url,
        queue=queue,
        env_file=env_file,
    )


def _letter_options(command: F) -> F:
    for decorator in reversed(
        [
            click.option(
                "--id",
                "ids",
                multiple=True,
                type=int,
                metavar="ID",
                help="Select this dead letter (repeat); with a filter, only if it passes it.",
            ),
            click.option(
                "--prefix",
                default=None,
                metavar="TEXT",
                help="Filter by group id prefix ('' for every dead letter).",
            ),
            click.option("--kind", default=None, metavar="KIND", help="Filter by event kind."),
            click.option(
                "--after",
                type=int,
                default=None,
                metavar="ID",
                help="Start after this dead letter id (where the previous call stopped).",
            ),
            *_shared_options(),
        ]
    ):
        command = decorator(command)
    return command


def _run_letters(
    verb: str,
    done: str,
    act: Callable[[Transport, dict[str, Any]], BulkResult[int]],
    *,
    ids: tuple[int, ...],
    prefix: str | None,
    kind: str | None,
    after: int | None,
    limit: int,
    yes: bool,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    if not ids and prefix is None and kind is None:
        raise CliError("give --id ID or a filter: --prefix ('' for every dead letter) or --kind", 2)
    config = resolve_config(url, queue, env_file)
    selection: dict[str, Any] = {
        "ids": list(ids) or None,
        "prefix": prefix,
        "kind": kind,
        "limit": limit,
        "after": after,
        "dry_run": not yes,
    }
    with open_transport(config) as transport:
        result = _checked(lambda: retrying(lambda: act(transport, selection), f"bulk {verb}"))
        name = transport.queue
        if result.matched == 0:
            refuse_never_used(transport, config)  # a mistyped queue is not "nothing matches"
    if as_json:
        click.echo(json.dumps({"queue": name, **result.model_dump()}, sort_keys=True))
        return
    _report(result, "dead letter", verb, done, name)


@bulk.command(name="redrive")
@_letter_options
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
def bulk_redrive(
    ids: tuple[int, ...],
    prefix: str | None,
    kind: str | None,
    after: int | None,
    limit: int,
    yes: bool,
    as_json: bool,
    tail: bool,
    retry_now: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Redrive the dead letters chosen by --id and/or a filter (--prefix, --kind).

    In place by default, as `pgque dead-letters redrive` does.

    \b
    Example:
      pgque bulk redrive --kind invoice.send --yes --url postgresql://localhost/app
    """
    _run_letters(
        "redrive",
        "redrove",
        lambda t, s: t.bulk_redrive(**s, in_place=not tail, retry_now=retry_now),
        ids=ids,
        prefix=prefix,
        kind=kind,
        after=after,
        limit=limit,
        yes=yes,
        as_json=as_json,
        url=url,
        queue=queue,
        env_file=env_file,
    )


@bulk.command(name="delete")
@_letter_options
@common_options
def bulk_delete(
    ids: tuple[int, ...],
    prefix: str | None,
    kind: str | None,
    after: int | None,
    limit: int,
    yes: bool,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Delete for good the dead letters chosen by --id and/or a filter (--prefix, --kind).

    \b
    Example:
      pgque bulk delete --prefix test- --yes --url postgresql://localhost/app
    """
    _run_letters(
        "delete",
        "deleted",
        lambda t, s: t.bulk_delete_dead_letters(**s),
        ids=ids,
        prefix=prefix,
        kind=kind,
        after=after,
        limit=limit,
        yes=yes,
        as_json=as_json,
        url=url,
        queue=queue,
        env_file=env_file,
    )


COMMANDS: list[click.Command] = [bulk]
