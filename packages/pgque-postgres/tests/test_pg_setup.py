"""Schema installation: concurrent setup, migrations against a fresh install, version checks."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import psycopg
import pytest

from pgque.core import SchemaMismatch
from pgque.postgres import (
    LATEST_VERSION,
    REQUIRED_VERSION,
    PostgresTransport,
    install_schema,
    schema_version,
)
from pgque.postgres._sql import migrations, queries

#: Everything that defines the schema, one sortable line per object.
CATALOG = """
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' '
       || coalesce(collation_name, '-') || ' ' || is_nullable || ' '
       || coalesce(column_default, '-') || ' ' || is_identity
  FROM information_schema.columns WHERE table_schema = 'pgque_fifo'
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'pgque_fifo'
UNION ALL
SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'pgque_fifo'::regnamespace
UNION ALL
SELECT 'options ' || relname || ' ' || coalesce(array_to_string(reloptions, ','), '-')
  FROM pg_class WHERE relnamespace = 'pgque_fifo'::regnamespace
UNION ALL
SELECT 'function ' || pg_get_functiondef(oid)
  FROM pg_proc WHERE pronamespace = 'pgque_fifo'::regnamespace
UNION ALL
SELECT 'view ' || viewname || ' ' || definition FROM pg_views WHERE schemaname = 'pgque_fifo'
UNION ALL
SELECT 'version ' || version || ' ' || name FROM pgque_fifo.schema_version
ORDER BY 1
"""


#: A claim's candidate scan, which migration 15 plans without a sort.
CANDIDATES = (
    "pgque_fifo.pgque_candidates_v2(text, integer, integer, double precision, double precision,"
    " text, text[])"
)
SORT_SETTING = (
    "SELECT 'enable_sort=off' = ANY (proconfig) FROM pg_proc WHERE oid = %s::regprocedure"
)


def catalog(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [str(row[0]) for row in conn.execute(CATALOG)]


def test_migrations_in_order_give_the_same_schema_as_a_fresh_install(
    scratch_db: Callable[[], str],
) -> None:
    fresh, migrated, upgraded = scratch_db(), scratch_db(), scratch_db()
    with psycopg.connect(fresh, autocommit=True) as conn:
        assert schema_version(conn) is None
        assert install_schema(conn) == LATEST_VERSION
    with psycopg.connect(migrated, autocommit=True) as conn:
        assert install_schema(conn, via_migrations=True) == LATEST_VERSION
    # A database left at version 1 by an older release is brought up to date.
    with psycopg.connect(upgraded, autocommit=True) as conn:
        conn.execute(migrations()[0].sql)
        assert schema_version(conn) == 1
        assert install_schema(conn) == LATEST_VERSION
        assert schema_version(conn) == LATEST_VERSION
    expected = catalog(fresh)
    assert len(expected) > 50
    assert catalog(migrated) == expected
    assert catalog(upgraded) == expected


def test_migration_files_are_numbered_uniquely_in_order() -> None:
    # Branches may land out of order (0005 before 0004): gaps are allowed, repeats are not.
    versions = [m.version for m in migrations()]
    assert versions[0] == 1
    assert versions == sorted(set(versions))
    assert versions[-1] == LATEST_VERSION


def test_the_required_version_has_every_function_the_queries_call() -> None:
    """``setup=False`` accepts a schema at REQUIRED_VERSION: the code must find there every
    function it calls (a schema at 9 passed the check while the code called 0010's and 0011's
    functions), and the behaviour it expects of them (0011 changed pgque_release_v1)."""
    import pgque.postgres_async

    first_defined: dict[str, int] = {}
    for migration in migrations():
        for name in re.findall(
            r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+pgque_fifo\.(\w+)", migration.sql, re.I
        ):
            first_defined.setdefault(name.lower(), migration.version)
    called = {
        name.lower()
        for text in queries().values()
        for name in re.findall(r"pgque_fifo\.(pgque_\w+)\s*\(", text)
    }
    assert len(called) > 20
    assert called <= set(first_defined), sorted(called - set(first_defined))
    needed = max(first_defined[name] for name in called)
    assert needed <= REQUIRED_VERSION, f"the queries call functions of migration {needed}"
    assert REQUIRED_VERSION >= 11  # migration 0011 also changed pgque_release_v1
    assert pgque.postgres_async.REQUIRED_VERSION == REQUIRED_VERSION


def test_a_migration_numbered_below_the_installed_version_is_still_applied(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn, via_migrations=True)
        # As if migration 15 had landed after the others were installed (it only sets one
        # function's setting, so it can run on today's schema; older ones refer to functions
        # a later migration dropped).
        conn.execute("DELETE FROM pgque_fifo.schema_version WHERE version = 15")
        conn.execute(f"ALTER FUNCTION {CANDIDATES} RESET enable_sort")
        assert install_schema(conn) == LATEST_VERSION
        versions = [r[0] for r in conn.execute("SELECT version FROM pgque_fifo.schema_version")]
        assert sorted(versions) == [m.version for m in migrations()]
        assert conn.execute(SORT_SETTING, [CANDIDATES]).fetchone() == (True,)


def test_eight_connections_install_the_schema_at_once(scratch_db: Callable[[], str]) -> None:
    url = scratch_db()
    barrier = threading.Barrier(8)
    results: list[object] = []

    def install() -> None:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                barrier.wait(timeout=10)
                results.append(install_schema(conn))
        except BaseException as exc:  # collected and asserted below
            results.append(exc)

    threads = [threading.Thread(target=install) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == [LATEST_VERSION] * 8
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT version FROM pgque_fifo.schema_version ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == list(range(1, LATEST_VERSION + 1))


def test_eight_transports_opening_on_an_empty_database_all_work(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []
    opened: list[PostgresTransport] = []

    def open_one() -> None:
        try:
            barrier.wait(timeout=10)
            opened.append(PostgresTransport.from_dsn(url, queue="q", min_size=1, max_size=1))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    try:
        assert errors == []
        assert len(opened) == 8
        assert opened[0].stats().groups == 0
    finally:
        for transport in opened:
            transport.close()


def test_installing_again_changes_nothing(scratch_db: Callable[[], str]) -> None:
    url = scratch_db()
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn)
        before = catalog(url)
        assert install_schema(conn) == LATEST_VERSION
    assert catalog(url) == before


def test_without_setup_a_missing_schema_is_refused(scratch_db: Callable[[], str]) -> None:
    url = scratch_db()
    with pytest.raises(SchemaMismatch, match="not installed"):
        PostgresTransport.from_dsn(url, setup=False, timeout=5)
    with psycopg.connect(url, autocommit=True) as conn:
        with pytest.raises(SchemaMismatch):
            PostgresTransport(conn, setup=False).stats()
        install_schema(conn)
        assert PostgresTransport(conn, setup=False).stats().messages == 0


def test_upgrading_turns_an_older_releases_empty_group_row_into_a_drained_one(
    scratch_db: Callable[[], str],
) -> None:
    # Releases before migrations 6 and 7 could leave a group row without messages behind (a drain
    # racing a publish that then rolled back): stats counted it and the next publish into the
    # group inherited its served place and priority. Upgrading (migration 7) makes them drained.
    url = scratch_db()
    with psycopg.connect(url, autocommit=True) as conn:
        for migration in migrations():
            if migration.version < 6:
                conn.execute(migration.sql)
        conn.execute(
            "INSERT INTO pgque_fifo.groups (queue, group_id, priority, until)"
            " VALUES ('q', 'stale', 3, 500), ('q', 'live', 0, NULL)"
        )
        conn.execute("SELECT pgque_fifo.pgque_publish_v1('q', 'live', '{\"kind\": \"e\"}', 0, 1)")
        assert install_schema(conn) == LATEST_VERSION
        rows = conn.execute(
            "SELECT group_id, drained, until, priority FROM pgque_fifo.groups"
            " WHERE queue = 'q' ORDER BY group_id"
        ).fetchall()
    assert rows == [("live", False, None, 0), ("stale", True, None, 4)]
    transport = PostgresTransport(url, queue="q", setup=False)
    try:
        assert transport.stats().groups == 1
    finally:
        transport.close()
