"""``pgque dashboard``: serve the web dashboard (pgque.core.dashboard) with uvicorn."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from pgque.core.cli._common import CliError, resolve_config
from pgque.core.cli._schedule_cmd import load_schedule
from pgque.core.cli._worker_cmd import debug_requested
from pgque.core.install import install_hint
from pgque.core.urls import mask_url

__all__ = ["COMMANDS"]

#: The environment variable of --token (pgque.core.dashboard.TOKEN_ENV, which needs the extra).
_TOKEN_ENV = "PGQUE_DASHBOARD_TOKEN"
#: The addresses --host may name without a warning: this machine only.
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@click.command(name="dashboard")
@click.option(
    "--url",
    "-u",
    default=None,
    metavar="URL",
    help="Queue URL: postgresql://..., redis://... [env PGQUE_URL]; every queue there is shown.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; also a host name requests may name (see --allowed-host).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--allow-actions",
    is_flag=True,
    help=(
        "Enable pause, resume, retry now, unblock, redrive, delete and cancel (read-only "
        "without it)."
    ),
)
@click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    envvar=_TOKEN_ENV,
    show_envvar=True,
    help="Require this token on every request (bearer, basic auth password, or ?token= once).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help=(
        "Also serve requests whose Host is NAME (a DNS name or IP address clients use to reach "
        "the dashboard; repeatable). Served besides: 127.0.0.1, localhost, ::1 and --host; "
        "any other Host answers 400 (DNS rebinding)."
    ),
)
@click.option(
    "--schedule",
    "schedule_specs",
    multiple=True,
    metavar="MODULE:SCHEDULE",
    help=(
        "A periodic schedule (a pgque.core.Schedule, as for `pgque schedules`) whose entries "
        "each queue's schedules page shows with their last and next tick (repeatable)."
    ),
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read PGQUE_* settings from this file instead of ./.env.",
)
def dashboard(
    url: str | None,
    host: str,
    port: int,
    allow_actions: bool,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    schedule_specs: tuple[str, ...],
    env_file: Path | None,
) -> None:
    """Serve the web dashboard: queues, groups, one group, dead letters, scheduled messages,
    periodic schedules, live counts.

    The queue metrics of `pgque metrics` (Prometheus text format) are at /metrics.

    Read-only unless --allow-actions; every action is a POST with a CSRF token and asks for
    confirmation. Listens on 127.0.0.1 unless --host says otherwise: use --token (or
    PGQUE_DASHBOARD_TOKEN) before listening anywhere else, and name with --allowed-host the
    host names clients use (requests naming another host are refused). Needs the web extra.

    \b
    Example:
      pgque dashboard --url postgresql://localhost/app --allow-actions
      pgque dashboard --url postgresql://localhost/app --schedule myapp.beat:beat
    """
    try:
        import uvicorn
        from starlette.routing import Route

        from pgque.core.dashboard import DEFAULT_ALLOWED_HOSTS, create_app
        from pgque.core.dashboard._security import allowed_host_names
        from pgque.core.dashboard._source import missing_async_package
        from pgque.core.metrics import QueueMetricsCollector, metrics_asgi_app
    except ImportError as exc:
        raise CliError(
            f"the dashboard needs {exc.name or 'its web dependencies'}; "
            f"run: {install_hint('pgque-core[web]')}"
        ) from exc
    config = resolve_config(url, None, env_file)
    if config.scheme == "memory":
        raise CliError(
            "a memory:// queue lives in one process: the dashboard cannot see it "
            "(mount create_app(transports=[...]) in that process instead)"
        )
    if token is not None and not token.strip():
        raise CliError(f"the token is empty (--token or {_TOKEN_ENV})")
    # As `pgque schedules` loads its MODULE:SCHEDULE (one line for a spec that fails).
    schedules = {
        spec: load_schedule(spec, debug=debug_requested()) for spec in dict.fromkeys(schedule_specs)
    }
    # Served: requests naming a loopback name, the address listened on, or an --allowed-host.
    for name in allowed_hosts:
        try:
            allowed_host_names([name])
        except ValueError as exc:
            raise CliError(f"--allowed-host: {exc}") from None
    served = [*DEFAULT_ALLOWED_HOSTS, *allowed_hosts]
    with contextlib.suppress(ValueError):  # an address that is no host name is never asked for
        served.extend(allowed_host_names([host]))
    if token is None and host not in _LOOPBACK:
        click.echo(
            f"pgque: warning: listening on {host} without --token: anyone who reaches it "
            "can read the queues" + (" and act on them" if allow_actions else ""),
            err=True,
        )
    if host not in _LOOPBACK and not allowed_hosts:
        click.echo(
            f"pgque: note: only requests for the host {host} or a loopback name are served: "
            "name the others clients use with --allowed-host NAME",
            err=True,
        )
    # The queue metrics of `pgque metrics` at /metrics, behind the same token.
    collector = QueueMetricsCollector(config.url)
    try:
        app = create_app(
            config.url,
            allow_actions=allow_actions,
            token=token,
            allowed_hosts=served,
            routes=[Route("/metrics", _AsgiEndpoint(metrics_asgi_app(collector)))],
            schedules=schedules,
        )
        missing = missing_async_package(config.url)
        if missing is not None:
            click.echo(
                f"pgque: note: {missing} is not installed: the dashboard reads "
                f"{config.scheme}:// through the blocking transport, in threads; for the "
                f"asyncio one, run: {install_hint(missing)}",
                err=True,
            )
        where = f"http://{host if ':' not in host else f'[{host}]'}:{port}/"
        mode = "actions enabled" if allow_actions else "read-only"
        click.echo(f"pgque dashboard for {mask_url(config.url)} on {where} ({mode})", err=True)
        uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
    finally:
        collector.close()


class _AsgiEndpoint:
    """An ASGI application as a Starlette route's endpoint (a route given a plain function
    treats it as a request handler; an object is called as an ASGI application)."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._app(scope, receive, send)


COMMANDS: list[click.Command] = [dashboard]
