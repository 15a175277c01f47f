"""``manage.py pgque_worker`` and the migration that installs the schema, on real Django and
PostgreSQL."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from pgque.core.errors import ConfigurationError
from pgque.django import DjangoApp, DjangoTransport, get_app, get_transport, psycopg_of
from pgque.postgres import LATEST_VERSION, schema_version

pytestmark = pytest.mark.usefixtures("django_url")

TESTS = Path(__file__).parent

#: The app ``call_command("pgque_worker", "test_django_worker:APP")`` runs (set by a test).
APP: DjangoApp | None = None


def test_the_migration_installed_the_schema() -> None:
    assert schema_version(psycopg_of("default")) == LATEST_VERSION
    applied = MigrationRecorder(connection).applied_migrations()
    assert ("pgque", "0001_schema") in applied


def test_the_last_migration_brings_the_latest_schema_version() -> None:
    """A new schema version needs a migration of pgque.django running the installer again
    (copy 0001_schema, depending on the last one, with the new SCHEMA_VERSION): without it a
    project already migrated would keep its old schema."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    (last,) = loader.graph.leaf_nodes("pgque")
    module = importlib.import_module(f"pgque.django.migrations.{last[1]}")
    assert module.SCHEMA_VERSION == LATEST_VERSION


def test_unapplying_the_migration_leaves_the_schema(fresh_queue: Callable[..., Any]) -> None:
    q = fresh_queue()
    q.publish("g", _event())
    call_command("migrate", "pgque", "zero", verbosity=0)
    try:
        assert ("pgque", "0001_schema") not in MigrationRecorder(connection).applied_migrations()
        assert schema_version(psycopg_of("default")) == LATEST_VERSION
        assert q.stats().messages == 1  # nothing dropped
    finally:
        call_command("migrate", "pgque", verbosity=0)
    assert ("pgque", "0001_schema") in MigrationRecorder(connection).applied_migrations()


def test_the_migration_does_nothing_on_another_database() -> None:
    from django.db import connections

    call_command("migrate", database="other", verbosity=0)
    assert ("pgque", "0001_schema") in MigrationRecorder(connections["other"]).applied_migrations()
    with pytest.raises(ConfigurationError, match="sqlite backend"):
        DjangoTransport(database="other")


def test_manage_py_pgque_worker_runs_the_project_tasks(payments: Any) -> None:
    """As a user runs it: ``python -m django pgque_worker`` (what manage.py runs) in a process
    of its own finds the tasks modules of the installed apps and drains the queue."""
    import pgque_django_testapp.tasks as tasks

    transport = get_transport()
    transport.purge()
    ids = tasks.pay.defer_many([{"account": f"a{n}", "cents": n} for n in range(5)])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "DJANGO_SETTINGS_MODULE": "pgque_django_settings",
    }
    done = subprocess.run(
        [sys.executable, "-m", "django", "pgque_worker", "--stop-when-idle", "-c", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["acked"] == 5
    rows = sorted(payments.objects.values_list("message_id", "cents"))
    assert rows == [(message_id, n) for n, message_id in enumerate(ids)]
    assert transport.stats().messages == 0


def test_pgque_worker_runs_a_given_app(
    fresh_queue: Callable[..., DjangoTransport], payments: Any
) -> None:
    global APP
    APP = DjangoApp(fresh_queue())

    @APP.task(group="g-{n}")
    def record(n: int) -> None:
        payments.objects.create(account="given", cents=n)

    record.defer_many([{"n": 1}, {"n": 2}])
    out = StringIO()
    try:
        call_command(
            "pgque_worker",
            "test_django_worker:APP",
            "--stop-when-idle",
            *("-c", "2", "--batch-size", "2", "--visibility", "10", "--hard-timeout", "0"),
            *("--shutdown-grace", "5", "--name", "django-test", "--log-level", "warning"),
            stdout=out,
        )
    finally:
        APP = None
    assert json.loads(out.getvalue())["acked"] == 2
    assert sorted(payments.objects.values_list("cents", flat=True)) == [1, 2]


def test_pgque_worker_refuses_what_is_not_an_app() -> None:
    with pytest.raises(CommandError, match="concurrency"):
        call_command("pgque_worker", "pgque_django_testapp.tasks:app", "-c", "0")
    with pytest.raises(CommandError, match="MODULE:APP"):
        call_command("pgque_worker", "test_django_worker")
    with pytest.raises(CommandError, match=r"not a pgque\.core\.App"):
        call_command("pgque_worker", "test_django_worker:TESTS")
    with pytest.raises(CommandError, match="cannot import"):
        call_command("pgque_worker", "test_django_worker:MISSING")
    assert get_app().transport is get_transport()  # the project's app is left open


def _event() -> Any:
    from pgque.core import Event

    return Event(kind="x")
