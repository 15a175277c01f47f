"""Live workers on the command line: ``workers`` lists a queue's workers, what each busy slot
holds and the leases still held in each worker's name (docs/workers.md)."""

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
from pgque.core.contract import SupportsWorkers, Transport
from pgque.core.explain import age_text, relative_text
from pgque.core.models import WorkerInfo

__all__ = ["COMMANDS", "worker_json"]


def _kept(transport: Transport) -> SupportsWorkers:
    """The transport as one that keeps live workers; CliError when its backend does not."""
    if not transport.capabilities.workers or not isinstance(transport, SupportsWorkers):
        raise CliError(
            "this backend does not list live workers (docs/workers.md lists the ones that do)"
        )
    return transport


def worker_json(info: WorkerInfo) -> dict[str, Any]:
    """*info* as the JSON object ``pgque workers --json`` prints; times ISO 8601 UTC."""
    out: dict[str, Any] = info.model_dump(mode="json")
    out["started_at"] = iso_utc(info.started_at)
    out["last_heartbeat"] = iso_utc(info.last_heartbeat)
    for slot in out["slots"]:
        slot["since"] = iso_utc(slot["since"])
    for lease in out["leases"]:
        lease["expires_at"] = iso_utc(lease["expires_at"])
    return out


def _leases_text(info: WorkerInfo, now: float) -> str:
    if not info.leases:
        return "-"
    last = max(lease.expires_at for lease in info.leases)
    return f"{len(info.leases)} (last expires {relative_text(last, now)})"


@click.command(name="workers")
@click.option("--alive", is_flag=True, help="Only the workers whose heartbeat is recent.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of tables.")
@common_options
def workers(
    alive: bool,
    as_json: bool,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Show the queue's workers: host, pid, version, concurrency, busy slots, when each
    started and last heartbeat, whether it is alive, what each busy slot runs and for how
    long, and the leases the server still holds in its name.

    A worker that stopped without a goodbye (killed, or its machine lost) is shown as gone,
    with the groups it still holds and when they become claimable again. Workers heartbeat
    every 10 s by default (pgque worker --heartbeat-every); one silent for three intervals is
    gone, and its row is removed after an hour.

    \b
    Examples:
      pgque workers --url postgresql://localhost/app
      pgque workers --alive --json --url redis://localhost/0
    """
    config = resolve_config(url, queue, env_file)
    with open_transport(config) as transport:
        kept = _kept(transport)
        listed = retrying(lambda: kept.workers(include_gone=not alive), "workers")
    if as_json:
        for info in listed:
            click.echo(json.dumps(worker_json(info), sort_keys=True))
        return
    if not listed:
        click.echo(f"no workers on queue {transport.queue}", err=True)
        return
    now = time.time()
    table = Table(
        title=f"workers of queue {transport.queue}", title_justify="left", box=SIMPLE_HEAD
    )
    table.add_column("worker", no_wrap=True, overflow="ellipsis", max_width=32)
    table.add_column("state", no_wrap=True)
    for column in ("pid", "busy", "heartbeat", "started"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("host", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("version", no_wrap=True)
    table.add_column("leases held", no_wrap=True)
    for info in listed:
        table.add_row(
            Text(info.id),
            "alive" if info.alive else "gone",
            str(info.pid),
            f"{info.slots_busy}/{info.concurrency}",
            relative_text(info.last_heartbeat, now),
            relative_text(info.started_at, now),
            Text(info.host),
            Text(info.version),
            _leases_text(info, now),
            style=None if info.alive else "red",
        )
    console = Console()
    console.print(table)
    held = Table(title="slots and leases", title_justify="left", box=SIMPLE_HEAD)
    held.add_column("worker", no_wrap=True, overflow="ellipsis", max_width=32)
    held.add_column("what", no_wrap=True)
    held.add_column("group", no_wrap=True, overflow="ellipsis", max_width=32)
    held.add_column("message", justify="right", no_wrap=True)
    held.add_column("when", no_wrap=True)
    for info in listed:
        for slot in info.slots:
            held.add_row(
                Text(info.id),
                f"slot {slot.slot}",
                Text(slot.group_id),
                str(slot.message_id),
                f"running for {age_text(max(info.last_heartbeat - slot.since, 0.0))}",
            )
        for lease in info.leases:
            held.add_row(
                Text(info.id),
                Text(f"lease {lease.holder}"),
                Text(lease.group_id),
                str(lease.message_id),
                f"expires {relative_text(lease.expires_at, now)}",
                style=None if info.alive else "red",
            )
    if held.row_count:
        console.print(held)


COMMANDS = [workers]
