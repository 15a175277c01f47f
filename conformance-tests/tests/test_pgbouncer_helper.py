"""The test-support PgBouncer: found or refused in one line, started and stopped cleanly."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from pgque.conformance.servers.pgbouncer import (
    INSTALL_HINT,
    PGBOUNCER_BIN_ENV,
    PgBouncer,
    Unavailable,
    find_pgbouncer,
    pgbouncer_version,
)


def test_a_missing_binary_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(PGBOUNCER_BIN_ENV, str(tmp_path / "no-pgbouncer"))
    with pytest.raises(Unavailable, match=PGBOUNCER_BIN_ENV) as caught:
        find_pgbouncer()
    assert "\n" not in str(caught.value)
    assert "\n" not in INSTALL_HINT
    assert "apt-get install pgbouncer" in INSTALL_HINT


def test_it_pools_in_transaction_mode_and_stops_without_a_trace(
    postgres_url: str, pgbouncer_factory: Callable[..., PgBouncer]
) -> None:
    bouncer = pgbouncer_factory(pool_size=1)
    assert pgbouncer_version() >= (1, 0, 0)
    folder, port = bouncer.folder, bouncer.port
    assert folder is not None
    with (
        psycopg.connect(bouncer.url, autocommit=True) as first,
        psycopg.connect(bouncer.url, autocommit=True) as second,
    ):
        # Two clients, one server connection (pool_size=1), lent per transaction.
        pids = {conn.execute("SELECT pg_backend_pid()").fetchone() for conn in (first, second)}
        assert len(pids) == 1
        row = first.execute("SELECT current_database()").fetchone()
        with psycopg.connect(postgres_url) as direct:
            assert row == (direct.info.dbname,)
    bouncer.stop()
    assert not folder.exists()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    bouncer.stop()  # idempotent
