"""How ``pgque worker`` runs its handler: blocking or asyncio, with the transport options,
retry policy and Prometheus endpoint its flags ask for.

The flags are added by :func:`run_options` and reach :func:`run_worker` as one
:class:`RunFlags`, so the command itself stays a short list of what it does.
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Literal, TypeVar

import click

from pgque.core.cli._config import Config
from pgque.core.cli._connecting import quick_options
from pgque.core.cli._errors import MISSING_PACKAGE_EXIT, CliError
from pgque.core.cli._never_used import MEMORY_NOTE, never_used_sentence
from pgque.core.cli._reach import wait_until_reachable
from pgque.core.cli._supervisor import process_slot, supervised
from pgque.core.errors import InvalidInput, PgqueError
from pgque.core.explain import never_used_async
from pgque.core.hints import install_hint
from pgque.core.registry import connect, connect_async
from pgque.core.worker import AsyncWorker, RetryPolicy, Worker, WorkerHooks, WorkerReport
from pgque.core.worker._bounds import Bounds
from pgque.core.worker._policy import RETRY_BOUNDS
from pgque.core.worker._running.handlers import is_async_callable
from pgque.core.worker._signals import SignalCounter, watch_signals

__all__ = [
    "flag_range",
    "RunFlags",
    "run_options",
    "run_worker",
    "max_attempts_value",
    "StopSignals",
    "exit_status",
    "WORKER_EXPORTERS_GROUP",
]

#: The entry-point group of the worker's metrics exporters: ``pgque worker --prometheus-port``
#: loads the entry named ``prometheus``, a callable ``(port, addr, queue) -> WorkerHooks`` that
#: serves the metrics on addr:port and returns the hooks feeding them (pgque-dashboard's
#: ``pgque.dashboard.metrics:serve_worker_metrics``).
WORKER_EXPORTERS_GROUP = "pgque.worker_exporters"
#: The distribution that registers the ``prometheus`` exporter (named while it is missing).
_EXPORTER_PACKAGE = "pgque-dashboard"

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("pgque.cli")


def flag_range(bounds: Bounds, *, integer: bool = False) -> click.IntRange | click.FloatRange:
    """Return the click type of a flag that sets an option ranging over *bounds*: the option's
    own range, so that the flag and the option never disagree."""
    low = _number(bounds.low)
    high = None if math.isinf(bounds.high) else _number(bounds.high)
    if integer:
        return click.IntRange(int(low), None if high is None else int(high))
    return click.FloatRange(low, high, min_open=bounds.low_open)


def _number(value: float) -> float:
    """*value* as an int when it is whole, so that ``--help`` shows ``31622400``, not
    ``31622400.0``."""
    return int(value) if float(value).is_integer() else value


def max_attempts_value(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> int | Literal["none"] | None:
    """Check ``--max-attempts``: an int >= 1, or ``none`` (unlimited); None when not given.

    Raises click.BadParameter (a usage error, exit 2) for anything else.
    """
    if value is None:
        return None
    text = value.strip().lower()
    if text == "none":
        return "none"
    if not text.isdigit() or int(text) < 1:
        raise click.BadParameter(f"{value!r} is neither an int >= 1 nor 'none'")
    return int(text)


@dataclass(frozen=True)
class RunFlags:
    """The ``pgque worker`` flags that choose how the worker runs (see :func:`run_options`)."""

    use_asyncio: bool = False
    max_attempts: int | Literal["none"] | None = None
    on_exhausted: str | None = None
    retry_base: float | None = None
    retry_factor: float | None = None
    retry_max_delay: float | None = None
    retry_jitter: float | None = None
    prometheus_port: int | None = None
    prometheus_addr: str = "127.0.0.1"

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RunFlags:
        """Build from the keyword arguments click passes for :func:`run_options`' flags."""
        return cls(
            use_asyncio=bool(options.pop("use_asyncio", False)),
            max_attempts=options.pop("max_attempts", None),
            on_exhausted=options.pop("on_exhausted", None),
            retry_base=options.pop("retry_base", None),
            retry_factor=options.pop("retry_factor", None),
            retry_max_delay=options.pop("retry_max_delay", None),
            retry_jitter=options.pop("retry_jitter", None),
            prometheus_port=options.pop("prometheus_port", None),
            prometheus_addr=options.pop("prometheus_addr", "127.0.0.1"),
        )

    def transport_options(self) -> dict[str, Any]:
        """The transport options the flags set: they beat ``PGQUE_*`` and the URL's query."""
        options: dict[str, Any] = {}
        if self.max_attempts is not None:
            options["max_attempts"] = None if self.max_attempts == "none" else self.max_attempts
        if self.on_exhausted is not None:
            options["on_exhausted"] = self.on_exhausted
        return options

    def retry_policy(self) -> RetryPolicy | None:
        """The worker's RetryPolicy with the ``--retry-*`` flags given; None: none given.

        Raises CliError (exit 2) for a combination RetryPolicy refuses.
        """
        given = {
            name: value
            for name, value in (
                ("base", self.retry_base),
                ("factor", self.retry_factor),
                ("max_delay", self.retry_max_delay),
                ("jitter", self.retry_jitter),
            )
            if value is not None
        }
        if not given:
            return None
        try:
            return RetryPolicy(**given)
        except InvalidInput as exc:
            raise CliError(f"invalid retry policy: {exc}", 2) from exc


def run_options(func: F) -> F:
    """Add the flags of :class:`RunFlags` to the ``pgque worker`` command."""
    defaults = RetryPolicy()
    for option in reversed(
        [
            click.option(
                "--asyncio",
                "use_asyncio",
                is_flag=True,
                help="Run the handler with the asyncio worker (automatic for an async "
                "handler or router; a sync handler then runs in threads).",
            ),
            click.option(
                "--max-attempts",
                default=None,
                metavar="N|none",
                callback=max_attempts_value,
                help="Deliveries of a message before --on-exhausted applies; 'none': "
                "unlimited [beats env PGQUE_MAX_ATTEMPTS and ?max_attempts=; default 10].",
            ),
            click.option(
                "--on-exhausted",
                type=click.Choice(["dead_letter", "block"]),
                default=None,
                help="After the last attempt: dead-letter the message or block its group "
                "[beats env PGQUE_ON_EXHAUSTED and ?on_exhausted=; default dead_letter].",
            ),
            click.option(
                "--retry-base",
                type=flag_range(RETRY_BOUNDS["base"]),
                default=None,
                metavar="SECONDS",
                help=f"Seconds to wait after a message's first failure (default {defaults.base:g})",
            ),
            click.option(
                "--retry-factor",
                type=flag_range(RETRY_BOUNDS["factor"]),
                default=None,
                help=f"Each later delay is this many times the one before "
                f"(default {defaults.factor:g})",
            ),
            click.option(
                "--retry-max-delay",
                type=flag_range(RETRY_BOUNDS["max_delay"]),
                default=None,
                metavar="SECONDS",
                help=f"The longest delay between two attempts (default {defaults.max_delay:g})",
            ),
            click.option(
                "--retry-jitter",
                type=flag_range(RETRY_BOUNDS["jitter"]),
                default=None,
                help=f"Spread of each delay, a fraction (0.1: +-10%) (default {defaults.jitter:g})",
            ),
            click.option(
                "--prometheus-port",
                type=click.IntRange(1, 65_535),
                default=None,
                metavar="PORT",
                help="Serve Prometheus metrics on http://ADDR:PORT/metrics (needs "
                "pgque-dashboard); with --processes N, process k serves on PORT+k-1.",
            ),
            click.option(
                "--prometheus-addr",
                default="127.0.0.1",
                show_default=True,
                metavar="ADDR",
                help="Address the metrics endpoint listens on (0.0.0.0: every interface).",
            ),
        ]
    ):
        func = option(func)
    return func


def _metrics_hooks(flags: RunFlags, queue: str) -> WorkerHooks | None:
    """Serve /metrics and return the hooks that feed it; None without --prometheus-port.

    The exporter is the ``prometheus`` entry of :data:`WORKER_EXPORTERS_GROUP`. Raises CliError
    (one line) when no distribution registers it (a usage error naming pgque-dashboard, as a
    command whose package is missing) or the port is taken.
    """
    if flags.prometheus_port is None:
        return None
    found = entry_points(group=WORKER_EXPORTERS_GROUP, name="prometheus")
    if not found:
        raise CliError(
            f"--prometheus-port needs {_EXPORTER_PACKAGE} (the Prometheus exporter), which is "
            f"not installed; run: {install_hint(_EXPORTER_PACKAGE)}",
            exit_code=MISSING_PACKAGE_EXIT,
        )
    (exporter, *_) = found
    # Under --processes N, process k serves on PORT + k - 1: N processes cannot share one port.
    port = flags.prometheus_port + process_slot() - 1
    where = f"{flags.prometheus_addr}:{port}"
    if port > 65_535:
        raise CliError(f"cannot serve metrics on {where}: --prometheus-port + --processes > 65536")
    try:
        serve_worker_metrics = exporter.load()
        hooks: WorkerHooks = serve_worker_metrics(port, flags.prometheus_addr, queue)
    except ImportError as exc:
        raise CliError(f"--prometheus-port: {exporter.value} failed to load: {exc}") from exc
    except OSError as exc:
        raise CliError(f"cannot serve metrics on {where}: {exc.strerror or exc}") from exc
    log.info("serving Prometheus metrics on http://%s/metrics", where)
    return hooks


def _wait_for_server(config: Config) -> None:
    """Return once the server answers; raise CliError after --connect-timeout.

    A worker process of a ``--processes`` supervisor waits as long as it takes instead, with
    one WARNING when it starts waiting and one when the server answers.
    """
    if not supervised():
        wait_until_reachable(config)
        return
    waiting_since: float | None = None
    while True:
        try:
            wait_until_reachable(config)
        except CliError as exc:
            if waiting_since is None:
                waiting_since = time.monotonic()
                log.warning("%s; waiting for it as long as it takes (--processes)", exc)
            continue
        if waiting_since is not None:
            log.warning(
                "reached %s after %.1f s of waiting",
                config.masked_url,
                time.monotonic() - waiting_since,
            )
        return


class StopSignals:
    """The stop signals (SIGINT, SIGTERM) of one run: handed to the worker as its own
    handlers would (:class:`SignalCounter`), the first one kept for the exit status."""

    def __init__(self, stop: Callable[[bool], None]) -> None:
        self._counter = SignalCounter(stop)
        #: the first stop signal received (None: none)
        self.first: int | None = None

    def __call__(self, signum: int) -> None:
        """Handle signal *signum*."""
        if self.first is None:
            self.first = signum
        self._counter(signum)


#: The first stop signal of the last :func:`run_worker` in this process (None: none).
received_signal: int | None = None


def exit_status() -> int:
    """Return the exit status of ``pgque worker`` after its run: 130 when it was stopped by
    SIGINT (Ctrl-C, as a shell reports an interrupted command), else 0 (SIGTERM is a service
    manager's ordinary stop; systemd counts 0 as a clean stop)."""
    return 130 if received_signal == signal.SIGINT else 0


def run_worker(
    config: Config,
    handler: Callable[..., Any],
    flags: RunFlags,
    *,
    stop_when_idle: bool,
    **worker_options: Any,
) -> WorkerReport:
    """Run *handler* on *config*'s queue until a signal (or idle); return the run's report.

    The first stop signal is kept in :data:`received_signal` (see :func:`exit_status`).

    An async handler (or a router holding one) or ``--asyncio`` gets :class:`AsyncWorker` on
    an asyncio transport, anything else :class:`Worker` on a blocking one. *worker_options*
    are the worker's keyword options. Raises CliError (exit 2) for an option the worker
    refuses, and what the transport and the worker raise.
    """
    retry = flags.retry_policy()
    hooks = _metrics_hooks(flags, config.queue)
    # A starting worker waits up to --connect-timeout for its server, then exits with one
    # line; once running, it rides out an outage of any length (see the worker's docs).
    _wait_for_server(config)
    options = quick_options(
        config.url, {**config.options, **flags.transport_options()}, one_shot=False
    )
    kwargs = {**worker_options, "retry": retry, "hooks": hooks}
    if flags.use_asyncio or is_async_callable(handler):
        return asyncio.run(_run_async(config, handler, options, kwargs, stop_when_idle))
    with connect(config.url, **options) as transport:
        try:
            runner = Worker(transport, handler, **kwargs)
        except InvalidInput as exc:
            raise CliError(str(exc), 2) from exc
        # The signal handlers are set before the start is logged: a signal after that line
        # stops the worker gracefully, never kills it.
        signals = StopSignals(runner.stop)
        undo = watch_signals(signals)
        try:
            _started(runner.name, transport.queue, config, worker_options, "threads")
            if process_slot() == 1:  # one warning for all the processes of --processes
                try:
                    _warn_never_used(never_used_sentence(transport, config))
                except (PgqueError, CliError) as exc:  # an outage is the run's business
                    log.debug("could not tell whether the queue was ever used: %s", exc)
            return runner.run(stop_when_idle=stop_when_idle, install_signal_handlers=False)
        finally:
            undo()
            _keep_signal(signals)


async def _run_async(
    config: Config,
    handler: Callable[..., Any],
    options: dict[str, Any],
    kwargs: dict[str, Any],
    stop_when_idle: bool,
) -> WorkerReport:
    async with connect_async(config.url, **options) as transport:
        try:
            runner = AsyncWorker(transport, handler, **kwargs)
        except InvalidInput as exc:
            raise CliError(str(exc), 2) from exc
        signals = StopSignals(runner.stop)
        undo = watch_signals(signals, asyncio.get_running_loop())
        try:
            _started(runner.name, transport.queue, config, kwargs, "asyncio")
            if process_slot() == 1:
                try:
                    sentence = await never_used_async(transport, where=config.masked_url)
                except PgqueError as exc:
                    log.debug("could not tell whether the queue was ever used: %s", exc)
                else:
                    if sentence is not None and config.scheme == "memory":
                        sentence += MEMORY_NOTE
                    _warn_never_used(sentence)
            return await runner.run(stop_when_idle=stop_when_idle, install_signal_handlers=False)
        finally:
            undo()
            _keep_signal(signals)


def _keep_signal(signals: StopSignals) -> None:
    global received_signal
    received_signal = signals.first


def _warn_never_used(sentence: str | None) -> None:
    """Log a WARNING when the worker's queue has never been used (a typo'd name?).

    The worker still runs: it may legitimately start before the first publish.
    """
    if sentence is not None:
        log.warning("%s; waiting for its first message anyway", sentence)


def _started(name: str, queue: str, config: Config, options: dict[str, Any], flavour: str) -> None:
    log.info(
        "worker %s on queue %s at %s, concurrency %d (%s)",
        name,
        queue,
        config.masked_url,
        options.get("concurrency", 1),
        "handler processes" if options.get("isolation") == "process" else flavour,
    )
