"""``pgque worker MODULE:HANDLER``: run a worker in the foreground, like ``celery worker``."""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pgque.core.cli import _supervisor
from pgque.core.cli._config import resolve_config
from pgque.core.cli._errors import CliError
from pgque.core.cli._flags import common_options
from pgque.core.cli._worker_run import (
    RunFlags,
    exit_status,
    flag_range,
    run_options,
    run_worker,
)
from pgque.core.live_workers import DEFAULT_HEARTBEAT_S
from pgque.core.tasks import App, AsyncApp
from pgque.core.worker import DEFAULT_HARD_TIMEOUT
from pgque.core.worker._bounds import Bounds
from pgque.core.worker._options import BOUNDS

__all__ = ["COMMANDS", "load_handler", "load_object", "debug_requested"]


def debug_requested(flag: bool = False) -> bool:
    """Tell whether tracebacks are wanted: ``--debug`` or ``PGQUE_DEBUG`` set (not ``0``)."""
    return flag or os.environ.get("PGQUE_DEBUG", "") not in {"", "0"}


def load_object(spec: str, *, what: str, example: str, debug: bool = False) -> Any:
    """Import ``package.module:attribute`` (dots allowed after the colon) and return it.

    The working directory is importable, as with ``python -m``. *what* and *example* word the
    usage error (``MODULE:HANDLER``, ``myapp.tasks:handle``). Raises CliError when the module
    or attribute is missing, or when importing the module raises; with *debug* the import's
    traceback is printed on stderr first.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise CliError(f"{what.lower()} must be MODULE:{what} (e.g. {example}), not {spec!r}", 2)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        # The user's module failed, not pgque: its traceback is what they need to see.
        if debug:
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
        how = "" if debug else " (--debug or PGQUE_DEBUG=1 prints the traceback)"
        raise CliError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}{how}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise CliError(f"{module_name!r} has no attribute {attribute!r}") from exc
    return target


def load_handler(spec: str, *, debug: bool = False) -> Callable[..., Any]:
    """Import ``package.module:attribute`` (dots allowed after the colon) and return it.

    The working directory is importable, as with ``python -m``. Raises CliError when the
    module or attribute is missing or not callable, or when importing the module raises;
    with *debug* the import's traceback is printed on stderr first.
    """
    target = load_object(spec, what="HANDLER", example="myapp.tasks:handle", debug=debug)
    if not callable(target):
        raise CliError(f"{spec} is not callable")
    handler: Callable[..., Any] = target
    return handler


@click.command(cls=_supervisor.RememberArgs)
@click.argument("handler_spec", metavar="MODULE:HANDLER")
@click.option(
    "--concurrency",
    "-c",
    type=flag_range(BOUNDS["concurrency"], integer=True),
    default=1,
    show_default=True,
    help="Handlers running at once (threads, or tasks with asyncio), each holding one lease.",
)
@click.option(
    "--visibility",
    type=flag_range(BOUNDS["visibility"]),
    default=30.0,
    show_default=True,
    help="Lease length in seconds; long handlers are extended automatically.",
)
@click.option(
    "--batch-size",
    type=flag_range(BOUNDS["batch_size"], integer=True),
    default=1,
    show_default=True,
    help="Leases claimed per round trip (claim_many).",
)
@click.option(
    "--min-priority",
    type=flag_range(BOUNDS["min_priority"], integer=True),
    default=0,
    show_default=True,
    help="Serve only groups of at least this priority.",
)
@click.option(
    "--hard-timeout",
    # 0 says "no limit" (None), so the flag takes 0 where the option's range starts above it.
    type=flag_range(Bounds(0, BOUNDS["hard_timeout"].high)),
    default=DEFAULT_HARD_TIMEOUT,
    show_default=True,
    help=(
        "Stop a handler after this many seconds (0: no limit): an async one is cancelled, "
        "one in a process (--isolation process) killed; one in a thread keeps its lease until "
        "it returns. The message is then retried, the attempt counting."
    ),
)
@click.option(
    "--isolation",
    type=click.Choice(["thread", "process"]),
    default="thread",
    show_default=True,
    help="Where handlers run: threads (or asyncio tasks), or child processes, which "
    "--hard-timeout and the end of --shutdown-grace kill (HANDLER must be importable).",
)
@click.option(
    "--warn-after",
    type=flag_range(BOUNDS["warn_after"]),
    default=None,
    metavar="SECONDS",
    help="Log a WARNING when a handler has run this long, and again every SECONDS while it "
    "runs (default: never).",
)
@click.option(
    "--heartbeat-every",
    type=flag_range(BOUNDS["heartbeat_every"]),
    default=DEFAULT_HEARTBEAT_S,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between two heartbeats of the worker, on a backend that lists live "
    "workers (pgque workers).",
)
@click.option(
    "--shutdown-grace",
    type=flag_range(BOUNDS["shutdown_grace"]),
    default=30.0,
    show_default=True,
    help="Seconds in-flight handlers get to finish on SIGINT/SIGTERM.",
)
@click.option("--stop-when-idle", is_flag=True, help="Exit once the queue has nothing to claim.")
@click.option(
    "--processes",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Worker processes, each with --concurrency slots, kept running by a supervisor.",
)
@click.option(
    "--name",
    default=None,
    help="Worker name for logs and pgque workers (default host:pid; with --processes, "
    "NAME-1 to NAME-N).",
)
@click.option(
    "--debug",
    is_flag=True,
    help="Print the traceback when MODULE fails to import [env PGQUE_DEBUG=1].",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@run_options
@common_options
def worker(
    handler_spec: str,
    concurrency: int,
    visibility: float,
    batch_size: int,
    min_priority: int,
    hard_timeout: float | None,
    isolation: str,
    warn_after: float | None,
    heartbeat_every: float,
    shutdown_grace: float,
    stop_when_idle: bool,
    processes: int,
    name: str | None,
    debug: bool,
    log_level: str,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
    **run_flags: Any,
) -> int:
    """Run HANDLER on every message of the queue until SIGINT or SIGTERM.

    HANDLER is called with the Event (or with the Event and its Lease when it takes two
    parameters); it may be a Router (pgque.core.Router), which picks a handler by the
    event's kind, or a task app (pgque.core.App or AsyncApp), which runs its tasks on its
    own URL unless --url or PGQUE_URL is given. Returning acks the message; raising retries
    it later with a backoff. An async handler (async def, or a Router holding one) runs on
    the asyncio worker, as any handler does with --asyncio. The first signal stops claiming
    and lets running handlers finish (--shutdown-grace); a second one stops at once. Prints
    the run's totals as JSON on exit; exits 130 after SIGINT (Ctrl-C), 0 after SIGTERM.

    \b
    Example:
      pgque worker myapp.tasks:handle --url postgresql://localhost/app -c 8
      pgque worker myapp.tasks:router --url postgresql://localhost/app --max-attempts 5
      pgque worker myapp.tasks:app -c 8
    """
    flags = RunFlags.from_options(run_flags)
    supervised = _supervisor.dispatch(
        processes,
        shutdown_grace=shutdown_grace,
        stop_when_idle=stop_when_idle,
        log_level=log_level,
        url=url,
        queue_name=queue,
        env_file=env_file,
    )
    if supervised:
        # The processes ran the workers; their summed totals are printed.
        return 130 if _supervisor.first_signal() == signal.SIGINT else 0
    if name is not None and _supervisor.supervised():
        # Each process of --processes is a worker of its own: its name (its row among the
        # queue's live workers, pgque workers) says which.
        name = f"{name}-{_supervisor.process_slot()}"
    handler = load_handler(handler_spec, debug=debug_requested(debug))
    # A task app bound to a URL runs there unless --url or PGQUE_URL says otherwise.
    own = (handler.url, handler.queue) if isinstance(handler, App | AsyncApp) else (None, None)
    config = resolve_config(url, queue, env_file, fallback=own)
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    report = run_worker(
        config,
        handler,
        flags,
        stop_when_idle=stop_when_idle,
        concurrency=concurrency,
        visibility=visibility,
        batch_size=batch_size,
        min_priority=min_priority,
        hard_timeout=hard_timeout or None,
        isolation=isolation,
        warn_after=warn_after,
        heartbeat_every=heartbeat_every,
        shutdown_grace=shutdown_grace,
        name=name,
    )
    click.echo(json.dumps(report.as_dict(), sort_keys=True))
    if _supervisor.supervised():
        return 0  # the supervisor says how the whole stopped (a process ends cleanly)
    return exit_status()


COMMANDS: list[click.Command] = [worker]
