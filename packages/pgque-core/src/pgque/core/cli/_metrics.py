"""``pgque metrics``: serve the queues' metrics to Prometheus (pgque.core.metrics)."""

from __future__ import annotations

import contextlib
import importlib
import signal
import threading
from pathlib import Path
from types import FrameType

import click

from pgque.core.cli._common import (
    CliError,
    connect_timeout_option,
    quick_options,
    resolve_config,
)
from pgque.core.errors import ConfigurationError, PgqueError
from pgque.core.metrics import (
    DEFAULT_TOP_K,
    MAX_TOP_K,
    QueueMetricsCollector,
)

__all__ = ["COMMANDS"]


@click.command()
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
    max_age: float,
    env_file: Path | None,
) -> None:
    """Serve queue metrics for Prometheus on http://ADDR:PORT/metrics until stopped.

    Each scrape reads every queue's counts (messages, groups, in flight, parked, blocked,
    paused, scheduled, dead letters, oldest message age) and its TOP-K oldest group heads; a
    queue whose backend fails is exported as pgque_up 0. Needs prometheus-client
    (pgque-core[prometheus]).

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
            connect_options=options,
            max_age=max_age,
        )
        prometheus_client = importlib.import_module("prometheus_client")
    except ConfigurationError as exc:
        raise CliError(str(exc)) from exc
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


COMMANDS: list[click.Command] = [metrics]
