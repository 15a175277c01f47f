"""The test-server helpers: every test run starts on PostgreSQL databases of its own making.

A database a previous run left behind (an older schema, rows, bloat on a server without
autovacuum) must never reach the next run: the helper recreates it when it was made by another
run, and keeps it for the processes of its own run (a test's subprocesses ask for it too).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from pgque.conformance.servers import postgres as servers

_TAG = "stamp" + uuid.uuid4().hex[:8]


@pytest.fixture
def named_server(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """PGQUE_TEST_POSTGRES_URL naming the server under test, with a worker tag of this test's."""
    base = urlunsplit(urlsplit(postgres_url)._replace(path="/postgres"))
    monkeypatch.setenv(servers.POSTGRES_URL_ENV, base)
    monkeypatch.setenv(servers.XDIST_WORKER_ENV, _TAG)
    yield base
    names = ["postgres_" + _TAG, "postgres_" + _TAG + "_2"]
    for name in names:
        keeper = servers._keepers.pop(name, None)
        if keeper is not None:
            keeper.close()
    with psycopg.connect(base, autocommit=True) as conn:
        for name in names:
            conn.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )


def _end_run(url: str) -> None:
    """As when every process of a run has ended: this process's connection to *url* closes."""
    servers._keepers.pop(urlsplit(url).path.lstrip("/")).close()


def _leave_a_mark(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE left_behind (x int)")


def _has_mark(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('public.left_behind') IS NOT NULL").fetchone()
    assert row is not None
    return bool(row[0])


def test_a_new_run_gets_a_fresh_database(
    named_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(servers.RUN_ENV, "run-one")
    first = servers.postgres_url()
    assert urlsplit(first).path == "/postgres_" + _TAG
    _leave_a_mark(first)
    # Another process of the same run (a test's subprocess) finds what the run made.
    assert servers.postgres_url() == first
    assert _has_mark(first)
    # Once run one is over, the next run starts clean in the same database.
    _end_run(first)
    monkeypatch.setenv(servers.RUN_ENV, "run-two")
    second = servers.postgres_url()
    assert second == first
    assert not _has_mark(second)


def test_a_run_going_on_beside_keeps_its_database(
    named_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(servers.RUN_ENV, "run-one")
    first = servers.postgres_url()
    _leave_a_mark(first)
    # Run one still works in it (this process holds its connection): run two takes another.
    monkeypatch.setenv(servers.RUN_ENV, "run-two")
    second = servers.postgres_url()
    assert urlsplit(second).path == "/postgres_" + _TAG + "_2"
    assert _has_mark(first)
    assert not _has_mark(second)


def test_without_a_run_the_named_database_is_used_as_is(
    named_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(servers.RUN_ENV, raising=False)
    monkeypatch.delenv(servers.XDIST_WORKER_ENV)
    assert servers.postgres_url() == named_server


def test_the_plugin_names_the_run_for_every_process_of_it() -> None:
    run = os.environ.get(servers.RUN_ENV)
    assert run, "the pgque-conformance plugin sets the run id at configure time"
