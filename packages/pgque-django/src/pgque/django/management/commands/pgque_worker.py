"""``manage.py pgque_worker [MODULE:APP]``: run the project's tasks until SIGINT or SIGTERM."""

from __future__ import annotations

import json
import logging
import sys
import threading
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections
from django.utils.module_loading import autodiscover_modules, import_string
from pgque.core.errors import PgqueError
from pgque.core.tasks import App
from pgque.core.worker import DEFAULT_HARD_TIMEOUT, Worker
from pgque.django import close, get_app, in_django
from pgque.django._settings import read_settings


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no type information
    """The worker of pgque's Django app."""

    help = (
        "Run the tasks of the project's pgque app (pgque.django.app; the tasks modules of "
        "PGQUE['TASKS'], or the tasks.py of every installed app) until SIGINT or SIGTERM, "
        "or the app MODULE:APP. Prints the run's totals as JSON on exit."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "app",
            nargs="?",
            metavar="MODULE:APP",
            help="A pgque.core.App to run instead of pgque.django.app (e.g. shop.tasks:app).",
        )
        parser.add_argument(
            "--concurrency",
            "-c",
            type=int,
            default=1,
            help="Tasks running at once, in threads, each holding one lease [1].",
        )
        parser.add_argument(
            "--visibility", type=float, default=30.0, help="Lease length in seconds [30]."
        )
        parser.add_argument(
            "--batch-size", type=int, default=1, help="Leases claimed per round trip [1]."
        )
        parser.add_argument(
            "--min-priority", type=int, default=0, help="Serve only groups of this priority [0]."
        )
        parser.add_argument(
            "--hard-timeout",
            type=float,
            default=DEFAULT_HARD_TIMEOUT,
            help=f"Give up on a task after this many seconds, 0: never [{DEFAULT_HARD_TIMEOUT:g}].",
        )
        parser.add_argument(
            "--warn-after",
            type=float,
            default=None,
            help="Log a WARNING when a task has run this long, and again every as long.",
        )
        parser.add_argument(
            "--shutdown-grace",
            type=float,
            default=30.0,
            help="Seconds running tasks get to finish on SIGINT/SIGTERM [30].",
        )
        parser.add_argument(
            "--stop-when-idle",
            action="store_true",
            help="Exit once the queue has nothing to claim.",
        )
        parser.add_argument("--name", default=None, help="Worker name for logs (default host:pid).")
        parser.add_argument(
            "--log-level",
            choices=["DEBUG", "INFO", "WARNING", "ERROR"],
            default="INFO",
            type=str.upper,
        )

    def handle(self, *args: Any, **options: Any) -> None:
        app = self._app(options["app"])
        logging.basicConfig(
            level=options["log_level"],
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
        try:
            # Each task runs as a Django request does: a connection that failed or outlived
            # CONN_MAX_AGE is closed before and after it, in the task's thread.
            worker = Worker(
                app.transport,
                in_django(app),
                concurrency=options["concurrency"],
                visibility=options["visibility"],
                batch_size=options["batch_size"],
                min_priority=options["min_priority"],
                hard_timeout=options["hard_timeout"] or None,
                warn_after=options["warn_after"],
                shutdown_grace=options["shutdown_grace"],
                name=options["name"],
            )
        except PgqueError as exc:
            raise CommandError(str(exc)) from exc
        try:
            report = worker.run(
                stop_when_idle=options["stop_when_idle"],
                install_signal_handlers=threading.current_thread() is threading.main_thread(),
            )
        finally:
            close_old_connections()
            if options["app"] is None:
                close()
            else:
                app.close()
        self.stdout.write(json.dumps(report.as_dict(), sort_keys=True))

    def _app(self, spec: str | None) -> App:
        if spec is None:
            config = read_settings()
            if config.tasks is None:
                autodiscover_modules("tasks")
            else:
                for module in config.tasks:
                    __import__(module)
            return get_app()
        module, sep, attribute = spec.partition(":")
        if not sep or not module or not attribute:
            raise CommandError(f"the app must be MODULE:APP (e.g. shop.tasks:app), not {spec!r}")
        try:
            found = import_string(f"{module}.{attribute}")
        except ImportError as exc:
            raise CommandError(f"cannot import {spec}: {exc}") from exc
        if not isinstance(found, App):
            raise CommandError(f"{spec} is a {type(found).__name__}, not a pgque.core.App")
        return found
