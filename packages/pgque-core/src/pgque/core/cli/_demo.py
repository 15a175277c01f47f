"""``pgque demo``: publish a workload, drain it with several worker processes, and check the
guarantees that were observed (exactly once, FIFO per group, one worker per group, fairness)."""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pgque.core.cli._config import Config, resolve_config
from pgque.core.cli._connecting import is_local, quick_options
from pgque.core.cli._demo_checks import Analysis, Workload, analyse
from pgque.core.cli._demo_types import WorkerResult, WorkerSpec, read_result
from pgque.core.cli._errors import CliError
from pgque.core.cli._flags import common_options
from pgque.core.cli.embedded import EmbeddedPostgres, cache_dir
from pgque.core.contract import SupportsPurge, Transport
from pgque.core.hints import install_hint
from pgque.core.models import Event
from pgque.core.registry import ENTRY_POINT_GROUP, KNOWN_SCHEMES, connect
from pgque.core.urls import parse_url

__all__ = ["COMMANDS", "demo"]

#: Events per publish_many call: big enough to amortise the round trip, small enough that
#: workers start on the first batch quickly.
PUBLISH_BATCH = 500
VISIBILITY_S = 30.0


@dataclass(frozen=True)
class DemoOptions:
    """The demo's knobs, as given on the command line."""

    groups: int
    events: int
    workers: int
    concurrency: int
    seed: int | None
    work_ms: float
    timeout: float


def _build_workload(options: DemoOptions) -> tuple[list[tuple[str, int]], Workload]:
    """Spread events over groups (one hot group gets a tenth) with random group priorities."""
    rng = random.Random(options.seed)
    width = len(str(options.groups - 1))
    names = [f"g{i:0{width}d}" for i in range(options.groups)]
    priorities = {name: rng.randint(0, 4) for name in names}
    counts = dict.fromkeys(names, 0)
    items: list[tuple[str, int]] = []
    hot = names[0]
    for i in range(options.events):
        # Every group gets at least one event; then one hot group takes ~10% so that fairness
        # has something to prove (a busy group must not starve the quiet ones).
        if i < len(names):
            group = names[i]
        elif rng.random() < 0.1:
            group = hot
        else:
            group = rng.choice(names)
        seq = counts[group]
        counts[group] = seq + 1
        items.append((group, seq))
    workload = Workload(
        counts={g: n for g, n in counts.items() if n}, priorities=priorities, published_by={}
    )
    return items, workload


def _publish(
    transport: Transport, items: list[tuple[str, int]], workload: Workload, published: list[int]
) -> None:
    """Publish *items* in batches, one publish_many per priority per batch, in order.

    Events are made just before their batch is sent, so ``created_at`` is the publish time
    the latency figures start from.
    """
    workload.publish_started_s = time.time()
    for start in range(0, len(items), PUBLISH_BATCH):
        chunk = items[start : start + PUBLISH_BATCH]
        by_priority: dict[int, list[tuple[str, Event]]] = {}
        for group, seq in chunk:
            event = Event(kind="demo.step", data={"seq": seq})
            by_priority.setdefault(workload.priorities[group], []).append((group, event))
        for priority, batch in sorted(by_priority.items()):
            transport.publish_many(batch, priority=priority)
        done = time.time()
        for key in chunk:
            workload.published_by[key] = done
        published[0] += len(chunk)
    workload.publish_finished_s = time.time()


@contextlib.contextmanager
def _server(config: Config, console: Console) -> Iterator[tuple[str, str]]:
    """Yield (url, description): the given URL, or an embedded PostgreSQL's when none was."""
    if config.url_given:
        yield config.url, config.masked_url
        return
    if not any(True for _ in entry_points(group=ENTRY_POINT_GROUP, name="postgresql")):
        raise CliError(
            "the demo's embedded PostgreSQL needs the Postgres transport (or pass "
            f"--url redis://... or --url memory://); run: {install_hint('pgque-postgres')}"
        )
    server = EmbeddedPostgres(cache_dir() / "postgres")
    with console.status("starting the embedded PostgreSQL server..."):
        url = server.start()
    try:
        yield url, f"embedded PostgreSQL (data in {server.data_dir})"
    finally:
        with console.status("stopping the embedded PostgreSQL server..."):
            server.stop()


def _memory_url(url: str) -> str:
    """Give a bare ``memory://`` a store name so every worker thread shares one store."""
    parsed = parse_url(url)
    if parsed.netloc_and_path:
        return url
    query = url.split("?", 1)[1] if "?" in url else ""
    name = f"memory://demo-{uuid.uuid4().hex[:8]}"
    return f"{name}?{query}" if query else name


class _Runner:
    """Start, watch and stop the demo's workers (spawned processes, or threads for memory)."""

    def __init__(self, specs: list[WorkerSpec], in_process: bool) -> None:
        self.specs = specs
        self.in_process = in_process
        ctx = multiprocessing.get_context("spawn")
        self.ready = ctx.Value("q", 0)
        self.acked = ctx.Value("q", 0)
        self.stop = ctx.Event()
        self._procs: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._ctx = ctx

    def start(self) -> None:
        """Start every worker."""
        # Imported here: `pgque --help` and the other commands need not load the worker.
        from pgque.core.cli._demo_worker import run_demo_worker

        for spec in self.specs:
            args = (spec, self.ready, self.acked, self.stop, self.in_process)
            if self.in_process:
                thread = threading.Thread(target=run_demo_worker, args=args, name=spec.label)
                thread.start()
                self._threads.append(thread)
            else:
                proc = self._ctx.Process(target=run_demo_worker, args=args, name=spec.label)
                proc.start()
                self._procs.append(proc)

    def dead(self) -> list[str]:
        """Return the labels of workers that ended before being told to stop."""
        units: list[Any] = self._procs or self._threads
        pairs = zip(self.specs, units, strict=True)
        return [spec.label for spec, unit in pairs if not unit.is_alive()]

    def wait_ready(self, timeout: float) -> None:
        """Wait until every worker has opened its transport; raise CliError otherwise."""
        deadline = time.monotonic() + timeout
        while self.ready.value < len(self.specs):
            if self.dead():
                break
            if time.monotonic() > deadline:
                raise CliError(f"the demo's workers did not start within {timeout:.0f} s")
            time.sleep(0.02)

    def finish(self, timeout: float) -> list[WorkerResult]:
        """Tell every worker to stop, wait for them and collect their results."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for unit in [*self._procs, *self._threads]:
            unit.join(max(0.1, deadline - time.monotonic()))
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
        return [read_result(Path(s.result_path), s.label) for s in self.specs]


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:>10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
    )


def _drain(
    runner: _Runner,
    transport: Transport,
    items: list[tuple[str, int]],
    workload: Workload,
    options: DemoOptions,
    console: Console,
) -> str | None:
    """Publish in a thread while workers drain; show progress; return an error or None."""
    published = [0]
    failure: list[BaseException] = []

    def publisher() -> None:
        try:
            _publish(transport, items, workload, published)
        except BaseException as exc:
            failure.append(exc)

    total = len(items)
    started = time.monotonic()
    thread = threading.Thread(target=publisher, name="demo-publisher", daemon=True)
    with _progress(console) as progress:
        pub_task = progress.add_task("published", total=total, rate="")
        ack_task = progress.add_task("handled", total=total, rate="")
        thread.start()
        while True:
            done = runner.acked.value
            elapsed = max(time.monotonic() - started, 1e-9)
            progress.update(pub_task, completed=published[0])
            progress.update(ack_task, completed=done, rate=f"{done / elapsed:,.0f}/s")
            if failure:
                return f"publishing failed: {failure[0]}"
            if done >= total:
                return None
            if dead := runner.dead():
                return f"worker {dead[0]} stopped unexpectedly"
            if elapsed > options.timeout:
                return f"timed out after {options.timeout:.0f} s with {done} of {total} handled"
            time.sleep(0.1)


def _report(
    console: Console,
    analysis: Analysis,
    title: str,
    final_stats: dict[str, Any],
) -> None:
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("guarantee / measure", no_wrap=True)
    table.add_column("", justify="center", no_wrap=True)
    table.add_column("observed", overflow="fold")
    for check in analysis.checks:
        mark = {True: "[green]PASS[/]", False: "[bold red]FAIL[/]", None: "[yellow]info[/]"}
        table.add_row(check.name, mark[check.ok], check.detail)
    table.add_section()
    for name, value in analysis.metrics:
        table.add_row(name, "", value)
    leftovers = ", ".join(f"{k} {v}" for k, v in final_stats.items())
    table.add_row("queue after", "", leftovers)
    console.print(table)


#: The signals that end the demo like Ctrl-C does (SIGINT): its workers are stopped first.
_STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def _stop_signals_interrupt() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP (a closed terminal) into KeyboardInterrupt while the demo runs.

    Their default action kills the demo at once, leaving its worker processes (and an
    embedded server) running; as an interrupt they stop them, as Ctrl-C does. Only the main
    thread may set signal handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_demo(config: Config, options: DemoOptions, console: Console, err: Console) -> int:
    with (
        _server(config, err) as (url, where),
        tempfile.TemporaryDirectory(prefix="pgque-demo-") as tmp,
    ):
        scheme = parse_url(url).scheme
        if scheme not in KNOWN_SCHEMES:
            known = ", ".join(f"{s}://" for s in KNOWN_SCHEMES)
            raise CliError(f"unknown queue URL scheme {scheme!r}; known schemes: {known}")
        in_process = scheme == "memory"
        if in_process:
            url = _memory_url(url)
        transport_options = dict(config.options)
        own_queue = "queue" not in transport_options
        transport_options.setdefault("queue", f"demo_{uuid.uuid4().hex[:8]}")
        transport = connect(url, **quick_options(url, transport_options))
        with transport:
            before = transport.stats()
            if before.messages or before.dead_letters:
                raise CliError(
                    f"queue {transport.queue!r} is not empty ({before.messages} messages, "
                    f"{before.dead_letters} dead letters); pass --queue with another name"
                )
            items, workload = _build_workload(options)
            unit = "threads of this process" if in_process else "processes"
            err.print(
                f"[bold]pgque demo[/]: {workload.total:,} events in {len(workload.counts)} groups "
                f"on {where}, queue [cyan]{transport.queue}[/], "
                f"{options.workers} worker {unit}, {options.concurrency} handler slot(s) each"
            )
            if in_process:
                err.print(
                    "[yellow]memory:// lives inside one process, so the workers run as threads "
                    "here; use --url postgresql://... or redis://... for worker processes.[/]"
                )
            specs = [
                WorkerSpec(
                    label=f"worker-{i + 1}",
                    url=url,
                    options=transport_options,
                    concurrency=options.concurrency,
                    visibility=VISIBILITY_S,
                    work_s=options.work_ms / 1000,
                    result_path=str(Path(tmp) / f"worker-{i + 1}.pickle"),
                )
                for i in range(options.workers)
            ]
            runner = _Runner(specs, in_process)
            runner.start()
            try:
                runner.wait_ready(120.0)
                problem = _drain(runner, transport, items, workload, options, err)
            except KeyboardInterrupt:
                runner.finish(10.0)
                raise
            results = runner.finish(max(10.0, VISIBILITY_S))
            final = transport.stats()
            if own_queue and isinstance(transport, SupportsPurge):
                # A demo's own queue is useless afterwards; leave nothing behind if it failed.
                transport.purge()
        errors = [f"{r.label}: {r.error}" for r in results if r.error]
        if problem is None and errors:
            problem = errors[0]
        handled = [record for r in results for record in r.handled]
        settled = [record for r in results for record in r.settled]
        analysis = analyse(
            handled,
            settled,
            workload,
            slots=options.workers * options.concurrency,
            fairness_checkable=is_local(Config(url=url)),
        )
        final_stats = {
            "messages": final.messages,
            "in flight": final.in_flight,
            "dead letters": final.dead_letters,
        }
        passed = analysis.ok and problem is None and not final.messages
        title = f"pgque demo on {parse_url(url).scheme}: {'PASSED' if passed else 'FAILED'}"
        _report(console, analysis, title, final_stats)
        if problem is not None:
            raise CliError(f"demo failed: {problem}")
        if final.messages or final.dead_letters:
            raise CliError(f"demo failed: the queue still holds {final.messages} messages")
        if not analysis.ok:
            failed = [c.name for c in analysis.checks if c.ok is False]
            raise CliError(f"demo failed: {', '.join(failed)}")
    return 0


@click.command()
@click.option("--groups", type=click.IntRange(1, 100_000), default=200, show_default=True)
@click.option("--events", type=click.IntRange(1, 10_000_000), default=20_000, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Worker processes (threads for memory://).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Handler threads per worker.",
)
@click.option(
    "--seed", type=int, default=None, help="Random seed of the workload (repeatable runs)."
)
@click.option(
    "--work-ms",
    type=click.FloatRange(0, 10_000),
    default=0.0,
    show_default=True,
    help="Time each handler spends working (sleeps).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(1, 86_400),
    default=600.0,
    show_default=True,
    help="Give up (and fail) after this many seconds.",
)
@common_options
def demo(
    groups: int,
    events: int,
    workers: int,
    concurrency: int,
    seed: int | None,
    work_ms: float,
    timeout: float,
    url: str | None,
    queue: str | None,
    env_file: Path | None,
) -> None:
    """Publish a workload, drain it with worker processes, and check the guarantees.

    With no URL (no --url, no PGQUE_URL) an embedded PostgreSQL is started in pgque's cache
    directory (~/.cache/pgque) and stopped at the end: no database needs to be installed.
    The same command runs on --url redis://... and --url memory://.

    Checked from what the workers observed: every event handled exactly once, FIFO within
    each group, never two handlers of one group at once, round-robin fairness, priorities
    kept. Exits 1 if a check fails.

    \b
    Examples:
      pgque demo
      pgque demo --groups 50 --events 2000 --workers 2 --seed 7
      pgque demo --url redis://127.0.0.1:6379/0
    """
    if events < groups:
        raise CliError(f"--events ({events}) must be at least --groups ({groups})", 2)
    config = resolve_config(url, queue, env_file, require_url=False)
    options = DemoOptions(groups, events, workers, concurrency, seed, work_ms, timeout)
    with _stop_signals_interrupt():
        _run_demo(config, options, Console(), Console(stderr=True))


COMMANDS: list[click.Command] = [demo]
