"""Fairness keys on the command line: ``keys`` lists them, ``key-policy`` reads, sets and
deletes a key's policy (docs/fairness.md)."""

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
from pgque.core.cli._ops import iso_utc
from pgque.core.contract import SupportsFairness, Transport
from pgque.core.explain import age_text, relative_text
from pgque.core.fairness import (
    DEFAULT_KEY_LABEL,
    MAX_FAIRNESS_KEY_BYTES,
    key_label,
    policy_text,
)
from pgque.core.models import KeyInfo, KeyPolicy
from pgque.core.validation import MAX_GROUPS_PAGE

__all__ = ["COMMANDS", "key_json"]


def _fair(transport: Transport) -> SupportsFairness:
    """The transport as one with fairness keys; CliError when its backend has none."""
    if not transport.capabilities.fairness or not isinstance(transport, SupportsFairness):
        raise CliError(
            "this backend does not support fairness keys (docs/fairness.md lists the ones that do)"
        )
    return transport


def key_json(info: KeyInfo) -> dict[str, Any]:
    """*info* as the JSON object ``pgque keys --json`` prints; times ISO 8601 UTC."""
    out: dict[str, Any] = info.model_dump(mode="python")
    if info.next_token_at is not None:
        out["next_token_at"] = iso_utc(info.next_token_at)
    return out


@click.command(name="keys")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_GROUPS_PAGE),
    default=100,
    show_default=True,
    help="At most this many keys.",
)
@click.option(
    "--after",
    default=None,
    metavar="KEY",
    help="Start after this key (the last one of the previous page; '' for the default key).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@common_options
def keys(
    limit: int,
    after: str | None,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """List a queue's fairness keys: in flight, groups, backlog, oldest age and policy.

    Keys with groups or a policy of their own, in byte order; "(no key)" is the groups
    published without one. A page holds --limit keys; pass the last key as --after for the
    next one.

    \b
    Example:
      pgque keys --url postgresql://localhost/app
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        fair = _fair(transport)
        page = retrying(lambda: fair.keys(limit, after=after), "keys")
    if as_json:
        for info in page:
            click.echo(json.dumps(key_json(info), sort_keys=True))
        return
    if not page:
        click.echo("no keys" + (f" after {after!r}" if after is not None else ""), err=True)
        return
    now = time.time()
    table = Table(title=f"keys of queue {transport.queue}", title_justify="left", box=SIMPLE_HEAD)
    table.add_column("key", no_wrap=True, overflow="ellipsis", max_width=24)
    for column in ("in flight", "groups", "messages", "oldest"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("policy", no_wrap=True, overflow="ellipsis")
    for info in page:
        oldest = "-" if info.oldest_age_s is None else age_text(info.oldest_age_s)
        policy = policy_text(info.policy) + ("" if info.own_policy else " (default)")
        if info.next_token_at is not None:
            policy += f"; next token {relative_text(info.next_token_at, now)}"
        cap = info.policy.max_in_flight
        table.add_row(
            Text(key_label(info.key)),
            f"{info.in_flight}" + ("" if cap is None else f"/{cap}"),
            str(info.groups),
            str(info.messages),
            oldest,
            Text(policy),
            style="bold" if cap is not None and info.in_flight >= cap else None,
        )
    Console().print(table)
    if len(page) == limit:
        click.echo(f"more keys may follow: --after {shlex.quote(page[-1].key)}", err=True)


@click.command(name="key-policy")
@click.argument("key", required=False, default=None)
@click.option(
    "--default", "default", is_flag=True, help="The default policy of keys without their own."
)
@click.option("--weight", type=float, default=None, help="Share against other keys (above 0).")
@click.option(
    "--max-in-flight", type=int, default=None, help="At most this many groups leased at once."
)
@click.option("--rate", type=float, default=None, help="At most this many claims per --per.")
@click.option("--per", type=float, default=None, help="The rate's window in seconds [1].")
@click.option("--burst", type=int, default=None, help="At most this many claims at once.")
@click.option("--delete", "delete", is_flag=True, help="Drop the policy (the default applies).")
@click.option("--json", "as_json", is_flag=True, help="Print the policy as JSON.")
@common_options
def key_policy(
    key: str | None,
    default: bool,
    weight: float | None,
    max_in_flight: int | None,
    rate: float | None,
    per: float | None,
    burst: int | None,
    delete: bool,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Show, set or delete KEY's policy (or, with --default, the default policy).

    Without an option it shows the policy. Any of --weight, --max-in-flight, --rate, --per,
    --burst sets the whole policy (options left out take their defaults: weight 1, no cap, no
    rate), stored for every worker's next claim. KEY '' is the groups published without a
    key.

    \b
    Example:
      pgque key-policy tenant-7 --weight 3 --max-in-flight 5 --url postgresql://localhost/app
      pgque key-policy --default --max-in-flight 20 --url postgresql://localhost/app
    """
    if default == (key is not None):
        raise CliError("give a KEY or --default (one of them)", 2)
    if key is not None and len(key.encode("utf-8", "surrogatepass")) > MAX_FAIRNESS_KEY_BYTES:
        raise CliError(f"KEY is longer than {MAX_FAIRNESS_KEY_BYTES} bytes", 2)
    changes = {
        "weight": weight,
        "max_in_flight": max_in_flight,
        "rate": rate,
        "per": per,
        "burst": burst,
    }
    given = {name: value for name, value in changes.items() if value is not None}
    if delete and given:
        raise CliError("--delete takes no policy option", 2)
    name = DEFAULT_KEY_LABEL if key == "" else ("the default policy" if key is None else key)
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        fair = _fair(transport)
        if delete:
            dropped = retrying(lambda: fair.delete_key_policy(key), "key-policy")
            click.echo(f"{name}: policy deleted" if dropped else f"{name}: had no policy")
            return
        if given:
            policy: KeyPolicy | None = retrying(
                lambda: fair.set_key_policy(
                    key,
                    weight=1.0 if weight is None else weight,
                    max_in_flight=max_in_flight,
                    rate=rate,
                    per=1.0 if per is None else per,
                    burst=burst,
                ),
                "key-policy",
            )
        else:
            policy = retrying(lambda: fair.key_policy(key), "key-policy")
    if as_json:
        click.echo(json.dumps(None if policy is None else policy.model_dump(), sort_keys=True))
        return
    if policy is None:
        click.echo(f"{name}: no policy of its own")
        return
    click.echo(f"{name}: {policy_text(policy)}")


COMMANDS: list[click.Command] = [keys, key_policy]
