"""The commands pgque-dashboard adds to ``pgque`` (entry-point group ``pgque.cli_commands``):
``pgque dashboard`` serves the web dashboard with uvicorn, ``pgque metrics`` the queues'
metrics for Prometheus.

Each entry point names a factory returning the click command. The web libraries are imported
when ``pgque dashboard`` runs, not when ``pgque --help`` lists it.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import click

from pgque.core.cli.commands import (
    CliError,
    connect_timeout_option,
    debug_requested,
    load_schedule,
    quick_options,
    resolve_config,
)
from pgque.core.errors import ConfigurationError, PgqueError
from pgque.core.hints import install_hint
from pgque.core.urls import mask_url
from pgque.dashboard.metrics import (
    DEFAULT_TOP_K,
    DEFAULT_TOP_KEYS,
    MAX_TOP_K,
    MAX_TOP_KEYS,
    QueueMetricsCollector,
)

__all__ = ["dashboard_command", "metrics_command"]

#: The environment variable of --token (pgque.dashboard.TOKEN_ENV; not imported from there,
#: which would load the web libraries whenever `pgque --help` lists the command).
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
    periodic schedules, fairness keys, live counts.

    The queue metrics of `pgque metrics` (Prometheus text format) are at /metrics.

    Read-only unless --allow-actions; every action is a POST with a CSRF token and asks for
    confirmation. Listens on 127.0.0.1 unless --host says otherwise: use --token (or
    PGQUE_DASHBOARD_TOKEN) before listening anywhere else, and name with --allowed-host the
    host names clients use (requests naming another host are refused).

    \b
    Example:
      pgque dashboard --url postgresql://localhost/app --allow-actions
      pgque dashboard --url postgresql://localhost/app --schedule myapp.beat:beat
    """
    import uvicorn
    from starlette.routing import Route

    from pgque.dashboard import DEFAULT_ALLOWED_HOSTS, create_app
    from pgque.dashboard._security import allowed_host_names
    from pgque.dashboard._source import missing_async_package
    from pgque.dashboard.metrics import metrics_asgi_app

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


@click.command(name="metrics")
@click.option(
    "--url",
    "-u",
    default=None,
    metavar="URL",
    help="Queue URL: postgresql://..., redis://..., memory:// [env PGQUE_URL].",
)
@click.option(
    "--queue",
    "-q",
    "queues",
    multiple=True,
    metavar="NAME",
    help="A queue to export (repeat for several) [default: every queue the server lists, "
    "else the URL's].",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9464,
    show_default=True,
    metavar="PORT",
    help="HTTP port (0: any free port).",
)
@click.option(
    "--addr",
    default="127.0.0.1",
    metavar="ADDR",
    show_default=True,
    help="Address to bind (0.0.0.0 exposes it to the network).",
)
@click.option(
    "--top-k",
    type=click.IntRange(0, MAX_TOP_K),
    default=DEFAULT_TOP_K,
    show_default=True,
    metavar="K",
    help="Groups with the oldest heads to export per queue (pgque_group_head_age_seconds).",
)
@click.option(
    "--top-keys",
    type=click.IntRange(0, MAX_TOP_KEYS),
    default=DEFAULT_TOP_KEYS,
    show_default=True,
    metavar="N",
    help="Fairness keys with the largest backlog to export per queue (pgque_key_*), on a "
    "backend with fairness keys.",
)
@click.option(
    "--max-age",
    type=click.FloatRange(0, 3600),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="Answer a scrape from the last reading while it is younger than this (several "
    "scrapers, one read of the backend).",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read PGQUE_* settings from this file instead of ./.env.",
)
@connect_timeout_option
def metrics(
    url: str | None,
    queues: tuple[str, ...],
    port: int,
    addr: str,
    top_k: int,
    top_keys: int,
    max_age: float,
    env_file: Path | None,
) -> None:
    """Serve queue metrics for Prometheus on http://ADDR:PORT/metrics until stopped.

    Each scrape reads every queue's counts (messages, groups, in flight, parked, blocked,
    paused, scheduled, dead letters, oldest message age), its TOP-K oldest group heads and, on
    a backend with fairness keys, its TOP-KEYS keys with the largest backlog; a queue whose
    backend fails is exported as pgque_up 0.

    \b
    Example:
      pgque metrics --url postgresql://localhost/app --port 9464
    """
    config = resolve_config(url, None, env_file)
    try:
        options = quick_options(config.url, config.options)
        collector = QueueMetricsCollector(
            config.url,
            list(queues) or None,
            top_k=top_k,
            top_keys=top_keys,
            connect_options=options,
            max_age=max_age,
        )
    except ConfigurationError as exc:
        raise CliError(str(exc)) from exc
    prometheus_client: Any = importlib.import_module("prometheus_client")  # untyped, as there
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, _thread = prometheus_client.start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        collector.close()
        raise CliError(f"cannot serve metrics on {addr}:{port}: {exc.strerror or exc}") from exc
    where = f"http://{addr}:{server.server_port}/metrics"
    click.echo(f"serving the metrics of {config.masked_url} on {where}", err=True)
    stop = threading.Event()

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.shutdown()
        with contextlib.suppress(PgqueError):
            collector.close()


def dashboard_command() -> click.Command:
    """Return ``pgque dashboard`` (the factory of its entry point)."""
    return dashboard


def metrics_command() -> click.Command:
    """Return ``pgque metrics`` (the factory of its entry point)."""
    return metrics
