"""Least privilege: SECURITY DEFINER entry points with a pinned search_path, and the roles.

Each test installs the schema in a scratch database, creates the three roles under names of its
own (roles are cluster-wide, so fixed names would collide between runs) and a login member of
each, then connects AS that login and shows what it can and cannot do. The test server trusts
local connections, so the logins need no password.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from pgque.core import Event, PgqueError, Settlement
from pgque.postgres import PostgresTransport, create_roles, install_schema
from pgque.postgres._sql import migrations

#: Entry points planned at every call (their own settings after the pinned search_path).
ENTRY_SETTINGS = {
    "pgque_oldest_groups_v1": ";plan_cache_mode=force_custom_plan;enable_seqscan=off",
    # index plans whatever the statistics say (migration 0012)
    "pgque_cancel_v1": ";enable_seqscan=off",
    "pgque_scheduled_v1": ";enable_seqscan=off",
    "pgque_next_due_v1": ";enable_seqscan=off",
    # DDL waits for its locks at most this long (migration 0018)
    "pgque_history_maintain_v1": ";lock_timeout=200ms",
    # planned at each call: a prefix's range and a cursor are constants then (migration 0021)
    "pgque_messages_v1": ";plan_cache_mode=force_custom_plan",
    "pgque_group_scheduled_v1": ";enable_seqscan=off",
}

#: The functions a caller may use directly; every other one is a helper they call.
ENTRY_POINTS = {
    # shared-sql/schema/10_publish.sql
    "pgque_publish_v2",
    "pgque_publish_many_v2",
    # 20_claim_settle.sql
    "pgque_claim_v2",
    "pgque_ack_v1",
    "pgque_ack_many_v1",
    "pgque_nack_v2",
    "pgque_release_lease_v1",
    "pgque_extend_v1",
    "pgque_dead_letter_v2",
    "pgque_settle_claim_v1",
    # 30_dead_letters.sql
    "pgque_dead_letters_v2",
    "pgque_delete_dead_letters_v1",
    "pgque_redrive_v3",
    # 40_groups.sql
    "pgque_pause_v1",
    "pgque_resume_v2",
    "pgque_retry_now_v1",
    "pgque_unblock_v2",
    "pgque_group_v1",
    "pgque_groups_v1",
    "pgque_oldest_groups_v1",
    # 50_scheduling.sql
    "pgque_schedule_v2",
    "pgque_schedule_many_v2",
    "pgque_cancel_v1",
    "pgque_scheduled_v1",
    "pgque_publish_tick_v2",
    "pgque_last_tick_v1",
    "pgque_next_due_v1",
    # 45_fairness.sql
    "pgque_group_key_v1",
    "pgque_set_key_policy_v1",
    "pgque_key_policy_v1",
    "pgque_delete_key_policy_v1",
    "pgque_keys_v1",
    "pgque_key_info_v1",
    # 60_queues.sql
    "pgque_stats_v3",
    "pgque_purge_v1",
    # 70_partition_keys.sql
    "pgque_dedup_reap_v1",
    "pgque_publish_dedup_v1",
    "pgque_partition_slots_v1",
    "pgque_partition_reset_slots_v1",
    "pgque_partition_purge_v1",
    # 55_history.sql
    "pgque_set_history_v1",
    "pgque_history_v1",
    "pgque_history_maintain_v1",
    # 56_browse.sql
    "pgque_groups_prefixed_v1",
    "pgque_messages_v1",
    "pgque_message_v1",
    "pgque_group_scheduled_v1",
    # 57_workers.sql
    "pgque_heartbeat_v1",
    "pgque_goodbye_v1",
    "pgque_workers_v1",
}
PINNED = "search_path=pg_catalog, pgque_fifo, pg_temp"
#: Helpers that carry a setting of their own (and are not entry points).
HELPER_SETTINGS = {
    # a claim's scan walks the ready index, whatever the statistics (migration 0014)
    "pgque_candidates_v2": "lock_timeout=20ms;enable_sort=off",
    # a keyed claim walks the keys' and the groups' indexes (migration 0017)
    "pgque_fair_claim_v1": "enable_sort=off;enable_seqscan=off;plan_cache_mode=force_generic_plan",
    "pgque_key_seen_v1": "enable_seqscan=off",
    "pgque_share_group_v1": "lock_timeout=20ms",
    "pgque_group_page_v1": "plan_cache_mode=force_custom_plan",
    "pgque_group_prefix_page_v1": "plan_cache_mode=force_custom_plan",
    # index plans whatever the statistics say (migration 0012)
    "pgque_promote_v1": "enable_seqscan=off",
    "pgque_promote_one_v1": "enable_seqscan=off",
    "pgque_promote_group_v1": "enable_seqscan=off",
    "pgque_join_due_v1": "enable_seqscan=off",
    "pgque_lock_join_v2": "enable_seqscan=off",
    "pgque_setup_roles_v1": "search_path=pg_catalog, pg_temp",
}


@dataclass(frozen=True)
class Roles:
    """The role names of one test and the URL of a login in each."""

    producer: str
    worker: str
    admin: str
    db_url: str

    def login_url(self, role: str) -> str:
        parts = urlsplit(self.db_url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit(parts._replace(netloc=f"{role}_login@{host}"))


def _drop_after(url: str, postgres_url: str, names: tuple[str, ...]) -> None:
    """Drop the scratch database at *url*, then the roles *names* (and their logins)."""
    # Roles owning objects in a database can only go once that database is gone.
    database = urlsplit(url).path.lstrip("/")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        for role in names:
            for name in (f"{role}_login", role):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def roles(scratch_db: Callable[[], str], postgres_url: str) -> Iterator[Roles]:
    """Install the schema in a scratch database and create the roles and their logins."""
    suffix = uuid.uuid4().hex[:8]
    url = scratch_db()
    names = Roles(f"prod_{suffix}", f"work_{suffix}", f"adm_{suffix}", url)
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn)
        create_roles(conn, producer=names.producer, worker=names.worker, admin=names.admin)
        for role in (names.producer, names.worker, names.admin):
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                    sql.Identifier(f"{role}_login"), sql.Identifier(role)
                )
            )
    yield names
    _drop_after(url, postgres_url, (names.producer, names.worker, names.admin))


@pytest.fixture
def as_role(roles: Roles) -> Iterator[Callable[[str], psycopg.Connection[tuple[object, ...]]]]:
    """Return ``connect(role)``: an autocommit connection as the login member of *role*."""
    opened: list[psycopg.Connection[tuple[object, ...]]] = []

    def connect(role: str) -> psycopg.Connection[tuple[object, ...]]:
        conn = psycopg.connect(roles.login_url(role), autocommit=True)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


def _denied(conn: psycopg.Connection[tuple[object, ...]], statement: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement)


TABLES = (
    "messages",
    "groups",
    "dead_letters",
    "dedup_keys",
    "partition_slots",
    "scheduled",
    "ticks",
)


def test_entry_points_are_security_definer_with_a_pinned_search_path(
    scratch_db: Callable[[], str],
) -> None:
    url = scratch_db()
    with psycopg.connect(url, autocommit=True) as conn:
        install_schema(conn)
        rows = conn.execute(
            """
            SELECT p.proname, p.prosecdef, coalesce(array_to_string(p.proconfig, ';'), ''),
                   has_function_privilege('public', p.oid, 'EXECUTE')
              FROM pg_proc p WHERE p.pronamespace = 'pgque_fifo'::regnamespace
            """
        ).fetchall()
        public_usage = conn.execute(
            "SELECT has_schema_privilege('public', 'pgque_fifo', 'USAGE')"
        ).fetchone()
    assert public_usage == (False,)
    found = {str(name) for name, *_ in rows}
    assert found >= ENTRY_POINTS
    for name, definer, config, public in rows:
        assert public is False, f"{name} is executable by PUBLIC"
        if name in ENTRY_POINTS:
            assert definer is True, f"{name} is not SECURITY DEFINER"
            want = PINNED + ENTRY_SETTINGS.get(str(name), "")
            assert config == want, f"{name} has search_path {config!r}"
        else:
            # A helper must never run with its owner's rights on its own.
            assert definer is False, f"{name} is SECURITY DEFINER but not an entry point"
            assert config == HELPER_SETTINGS.get(str(name), ""), f"{name} has {config!r}"


def test_producer_publishes_and_can_do_nothing_else(
    roles: Roles, as_role: Callable[..., psycopg.Connection[tuple[object, ...]]]
) -> None:
    conn = as_role(roles.producer)
    # setup=True on an installed schema only reads its version: a producer may open it so.
    transport = PostgresTransport(conn, queue="orders")
    assert transport.publish("g", Event(kind="k", data={"n": 1})) > 0
    assert transport.publish_many([("g", Event(kind="k")), ("h", Event(kind="k"))])
    later = transport.publish("g", Event(kind="later"), delay=60)
    assert transport.publish_many([("g", Event(kind="k"))], delay=60)
    assert next(m.id for m in transport.scheduled()) == later
    assert transport.cancel(later) is True
    assert transport.publish_tick("every-minute", 60.0, "g", Event(kind="tick")) is not None
    assert transport.last_tick("every-minute") == 60.0
    for call in (
        lambda: transport.claim(),
        lambda: transport.stats(),
        lambda: transport.dead_letters(),
        lambda: transport.redrive(),
        lambda: transport.unblock("g"),
        lambda: transport.purge(),
        lambda: transport.pause("g"),
        lambda: transport.group("g"),
    ):
        with pytest.raises(PgqueError, match="permission denied"):
            call()
    for table in TABLES:
        _denied(conn, f"SELECT * FROM pgque_fifo.{table}")
        _denied(conn, f"DELETE FROM pgque_fifo.{table}")
        _denied(conn, f"DROP TABLE pgque_fifo.{table}")
    _denied(conn, "SELECT pgque_fifo.pgque_lock_group_v3('orders', 'g', 0, '')")
    _denied(conn, "CREATE TABLE pgque_fifo.mine (x int)")
    _denied(conn, "DROP SCHEMA pgque_fifo CASCADE")
    _denied(conn, "INSERT INTO pgque_fifo.schema_version (version, name) VALUES (99, 'x')")


def test_worker_claims_and_settles_but_cannot_publish_or_read(
    roles: Roles, as_role: Callable[..., psycopg.Connection[tuple[object, ...]]]
) -> None:
    with PostgresTransport(as_role(roles.producer), queue="orders") as producer:
        for n in range(4):
            producer.publish(f"g{n}", Event(kind="k", data=n))
    conn = as_role(roles.worker)
    worker = PostgresTransport(conn, queue="orders")
    leases = worker.claim_many(4, 30, holder="host:1:0")
    assert len(leases) == 4
    assert worker.extend(leases[0], 60) is not None
    assert worker.ack(leases[0])
    assert worker.nack(leases[1], delay=0, error=ValueError("bad sku"))
    assert worker.dead_letter(leases[2], "bad", error="rejected")
    assert worker.ack_many([leases[3]]) == [True]
    assert worker.stats().messages == 1
    again = worker.claim()
    assert again is not None
    assert worker.release(again)
    fused = worker.settle_and_claim([], 1)
    assert worker.settle_and_claim([Settlement.ack(fused.leases[0])], 0).settled == [True]
    for call in (
        lambda: worker.publish("g", Event(kind="k")),
        lambda: worker.dead_letters(),
        lambda: worker.redrive(),
        lambda: worker.unblock("g1"),
        lambda: worker.purge(),
        lambda: worker.pause("g1"),
        lambda: worker.resume("g1"),
        lambda: worker.group("g1"),
        lambda: worker.groups(),
        lambda: worker.delete_dead_letters([1]),
    ):
        with pytest.raises(PgqueError, match="permission denied"):
            call()
    for table in TABLES:
        _denied(conn, f"SELECT * FROM pgque_fifo.{table}")
        _denied(conn, f"UPDATE pgque_fifo.{table} SET queue = 'x'")
        _denied(conn, f"TRUNCATE pgque_fifo.{table}")
    _denied(conn, "SELECT * FROM pgque_fifo.queue_stats")
    # The wake-up channel (LISTEN/NOTIFY) works for a worker opened from its own DSN.
    with PostgresTransport.from_dsn(roles.login_url(roles.worker), queue="orders") as listener:
        assert listener.wait_for_messages(0.2) is True  # it listens: the channel is granted
    _denied(conn, "SELECT pgque_fifo.pgque_release_v1('orders', 'g1', NULL)")
    _denied(conn, "DROP FUNCTION pgque_fifo.pgque_claim_v2")


def test_roles_set_up_before_a_migration_keep_working_after_it(
    scratch_db: Callable[[], str], postgres_url: str
) -> None:
    """Roles created at version 7, then a plain ``migrate``: the worker role may still claim,
    nack, release, dead-letter and settle-and-claim through the entry points the new release
    calls (migrations 8 and 9 grant them)."""
    suffix = uuid.uuid4().hex[:8]
    url = scratch_db()
    names = Roles(f"prod_{suffix}", f"work_{suffix}", f"adm_{suffix}", url)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for migration in migrations():
                if migration.version < 8:
                    conn.execute(migration.sql)
            conn.execute(
                "SELECT pgque_fifo.pgque_setup_roles_v1(%s, %s, %s)",
                [names.producer, names.worker, names.admin],
            )
            for role in (names.producer, names.worker):
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                        sql.Identifier(f"{role}_login"), sql.Identifier(role)
                    )
                )
            install_schema(conn)  # the upgrade, without --create-roles
        with PostgresTransport.from_dsn(names.login_url(names.producer), queue="up") as producer:
            producer.publish("g", Event(kind="a"))
            producer.publish("h", Event(kind="b"))
            # Migration 10's entry points are granted to the roles set up before it.
            assert producer.cancel(producer.publish("s", Event(kind="s"), delay=60)) is True
            assert producer.last_tick("e") is None
        with PostgresTransport.from_dsn(names.login_url(names.worker), queue="up") as worker:
            lease = worker.claim(holder="host:1:0")
            assert lease is not None
            assert worker.nack(lease, error=ValueError("bad sku"))
            again = worker.claim()
            assert again is not None
            assert worker.release(again)
            last = worker.claim()
            assert last is not None
            assert worker.dead_letter(last, "bad", error="rejected")
            assert worker.stats().messages == 1
            fused = worker.settle_and_claim([], 1)
            assert [lease.event.kind for lease in fused.leases] == ["b"]
            assert worker.settle_and_claim([Settlement.ack(fused.leases[0])], 1).settled == [True]
    finally:
        _drop_after(url, postgres_url, (names.producer, names.worker, names.admin))


def test_migration_16_keeps_roles_set_up_at_15_working(
    scratch_db: Callable[[], str], postgres_url: str
) -> None:
    """Roles created at version 15, then a plain ``migrate`` to 16 (which drops the superseded
    entry points and adds the two redrive helpers): the helpers go to the owner of
    pgque_redrive_v3, so the admin role still redrives both ways, and the worker still claims
    and reads stats."""
    suffix = uuid.uuid4().hex[:8]
    url = scratch_db()
    names = Roles(f"prod_{suffix}", f"work_{suffix}", f"adm_{suffix}", url)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for migration in migrations():
                if migration.version <= 15:
                    conn.execute(migration.sql)
            # The schema function itself: create_roles needs the code's required version.
            conn.execute(
                "SELECT pgque_fifo.pgque_setup_roles_v1(%s, %s, %s)",
                [names.producer, names.worker, names.admin],
            )
            for role in (names.producer, names.worker, names.admin):
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                        sql.Identifier(f"{role}_login"), sql.Identifier(role)
                    )
                )
            install_schema(conn)  # the upgrade to 16, without --create-roles
            owners = conn.execute(
                "SELECT p.proname, p.proowner::regrole::text FROM pg_proc p"
                " WHERE p.pronamespace = 'pgque_fifo'::regnamespace"
                " AND p.proname LIKE 'pgque_redrive%' ORDER BY 1"
            ).fetchall()
            gone = conn.execute(
                "SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'pgque_fifo'::regnamespace"
                " AND p.proname = ANY (%s)",
                [["pgque_claim_v1", "pgque_stats_v2", "pgque_redrive_v1", "pgque_lock_group_v1"]],
            ).fetchone()
        assert owners == [
            ("pgque_redrive_at_tail_v1", names.admin),
            ("pgque_redrive_in_place_v1", names.admin),
            ("pgque_redrive_v3", names.admin),
        ]
        assert gone == (0,)
        with PostgresTransport.from_dsn(names.login_url(names.producer), queue="up") as producer:
            producer.publish("g", Event(kind="a"))
            producer.publish("h", Event(kind="b"))
        with PostgresTransport.from_dsn(
            names.login_url(names.worker), queue="up", max_attempts=1
        ) as worker:
            for _ in range(2):
                lease = worker.claim()
                assert lease is not None
                assert worker.dead_letter(lease, "bad")
            assert worker.stats().dead_letters == 2
        with PostgresTransport.from_dsn(names.login_url(names.admin), queue="up") as admin:
            first, second = admin.dead_letters()
            assert admin.redrive([first.id], in_place=True) == 1
            assert admin.redrive([second.id], in_place=False) == 1
            assert admin.stats().messages == 2
    finally:
        _drop_after(url, postgres_url, (names.producer, names.worker, names.admin))


def test_admin_operates_and_migrates(
    roles: Roles, as_role: Callable[..., psycopg.Connection[tuple[object, ...]]]
) -> None:
    with PostgresTransport(as_role(roles.producer), queue="orders") as producer:
        producer.publish("g", Event(kind="k"))
    conn = as_role(roles.admin)
    admin = PostgresTransport(conn, queue="orders", max_attempts=1)
    lease = admin.claim()
    assert lease is not None
    assert admin.nack(lease)
    assert admin.claim() is None  # exhausted: dead-lettered
    assert len(admin.dead_letters()) == 1
    assert admin.redrive() == 1
    assert conn.execute("SELECT count(*) FROM pgque_fifo.messages").fetchone() == (1,)
    assert admin.pause("g")
    assert admin.resume("g")
    assert [info.group_id for info in admin.groups()] == ["g"]
    info = admin.group("g")
    assert info is not None
    assert info.state == "ready"
    lease = admin.claim()
    assert lease is not None
    assert admin.dead_letter(lease, "bad")
    (dead,) = admin.dead_letters()
    assert admin.delete_dead_letters([dead.id]) == 1
    admin.purge()
    # The admin owns the schema: it can apply a migration (here: one reported missing,
    # migration 15, which sets a setting of a claim's candidate scan).
    candidates = (
        "pgque_fifo.pgque_candidates_v2(text, integer, integer, double precision,"
        " double precision, text, text[])"
    )
    conn.execute(f"ALTER FUNCTION {candidates} RESET enable_sort")
    conn.execute("DELETE FROM pgque_fifo.schema_version WHERE version = 15")
    install_schema(conn)
    assert conn.execute(
        "SELECT 'enable_sort=off' = ANY (proconfig) FROM pg_proc WHERE oid = %s::regprocedure",
        [candidates],
    ).fetchone() == (True,)


def test_a_hostile_search_path_cannot_hijack_an_entry_point(
    roles: Roles, as_role: Callable[..., psycopg.Connection[tuple[object, ...]]]
) -> None:
    # A schema the producer may use, full of look-alikes of the built-ins the functions call.
    with psycopg.connect(roles.db_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA evil")
        builtins = {
            "hashtext(text)": "integer",
            "hashtextextended(text, bigint)": "bigint",
            "clock_timestamp()": "text",
            "gen_random_uuid()": "text",
        }
        for signature, returns in builtins.items():
            conn.execute(
                f"CREATE FUNCTION evil.{signature} RETURNS {returns} LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'hijacked'; END $$"
            )
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA evil TO {}").format(sql.Identifier(roles.producer))
        )
    producer = as_role(roles.producer)
    producer.execute("SET search_path = evil, pg_catalog")
    # Without the pinned search_path, the function would resolve hashtext() to evil's.
    with pytest.raises(psycopg.errors.RaiseException, match="hijacked"):
        producer.execute("SELECT hashtext('x')")
    transport = PostgresTransport(producer, queue="orders")
    assert transport.publish("g", Event(kind="k")) > 0


def test_role_names_are_quoted_identifiers_not_sql(
    scratch_db: Callable[[], str], postgres_url: str
) -> None:
    url = scratch_db()
    odd = f'pgque "producer"; DROP TABLE pgque_fifo.messages; -- {uuid.uuid4().hex[:6]}'
    others = (f"w_{uuid.uuid4().hex[:8]}", f"a_{uuid.uuid4().hex[:8]}")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            install_schema(conn)
            create_roles(conn, producer=odd, worker=others[0], admin=others[1])
            assert conn.execute(
                "SELECT count(*) FROM pg_roles WHERE rolname = %s", [odd]
            ).fetchone() == (1,)
            assert conn.execute("SELECT to_regclass('pgque_fifo.messages')").fetchone() != (None,)
            with pytest.raises(PgqueError, match="distinct"):
                create_roles(conn, producer=odd, worker=odd, admin=others[1])
    finally:
        _drop_after(url, postgres_url, (odd, *others))


def test_roles_need_an_installed_schema(scratch_db: Callable[[], str]) -> None:
    from pgque.core import SchemaMismatch

    with psycopg.connect(scratch_db(), autocommit=True) as conn, pytest.raises(SchemaMismatch):
        create_roles(conn)


def test_pgque_install_create_roles(scratch_db: Callable[[], str], postgres_url: str) -> None:
    url = scratch_db()
    suffix = uuid.uuid4().hex[:8]
    names = (f"cp_{suffix}", f"cw_{suffix}", f"ca_{suffix}")
    script = Path(sys.executable).parent / "pgque"
    try:
        result = subprocess.run(
            [
                str(script),
                "install",
                "--url",
                url,
                "--create-roles",
                *("--producer-role", names[0], "--worker-role", names[1]),
                *("--admin-role", names[2]),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "installed the pgque schema" in result.stdout
        assert f"producer {names[0]}" in result.stdout
        with psycopg.connect(url) as conn:
            granted = conn.execute(
                "SELECT has_function_privilege(%s, 'pgque_fifo.pgque_publish_v2"
                "(text, text, text, integer, text, double precision)', 'EXECUTE'),"
                " has_function_privilege(%s, 'pgque_fifo.pgque_publish_v2"
                "(text, text, text, integer, text, double precision)', 'EXECUTE'),"
                " (SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'pgque_fifo')",
                [names[0], names[1]],
            ).fetchone()
        assert granted == (True, False, names[2])
    finally:
        _drop_after(url, postgres_url, names)
