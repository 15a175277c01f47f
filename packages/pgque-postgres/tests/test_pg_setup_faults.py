"""Opening a transport survives a connection cut while it installs or checks the schema."""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest

from pgque.postgres import PostgresTransport

pytestmark = pytest.mark.timeout(30)

#: The advisory lock install_schema takes (shared-sql/queries.sql, install_lock).
INSTALL_LOCK = 7067717565


def test_from_dsn_retries_a_connection_cut_during_setup(postgres_url: str) -> None:
    # A worker that starts while the server restarts (or a failover, or a pooler cutting it)
    # loses its first connection in the middle of the schema check: from_dsn must connect
    # again, as it does while the server starts, instead of failing the worker's start.
    name = f"pgque-setup-cut-{uuid.uuid4().hex[:8]}"
    dsn = f"{postgres_url}{'&' if '?' in postgres_url else '?'}application_name={name}"
    opened: list[PostgresTransport] = []
    failed: list[BaseException] = []

    def open_it() -> None:
        try:
            opened.append(PostgresTransport.from_dsn(dsn, queue="t_setup_cut", timeout=20))
        except BaseException as exc:
            failed.append(exc)

    opener = threading.Thread(target=open_it)
    with (
        psycopg.connect(postgres_url, autocommit=True) as holder,
        psycopg.connect(postgres_url, autocommit=True) as killer,
    ):
        with holder.transaction():
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (INSTALL_LOCK,))
            opener.start()
            for _ in range(200):  # until the opener waits for the install lock
                row = killer.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s AND wait_event_type = 'Lock'",
                    (name,),
                ).fetchone()
                if row:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the transport never waited for the install lock")
    opener.join(timeout=25)
    assert not failed, failed
    with opened[0] as transport:
        assert transport.stats().messages == 0
