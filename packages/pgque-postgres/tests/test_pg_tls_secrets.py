"""TLS and secrets on PostgreSQL, against a throwaway cluster (never the shared test server).

The cluster (:class:`pgque.conformance.servers.tls.TlsPostgres`) accepts only TLS connections
with a password. ``sslmode`` and ``sslrootcert`` in the URL reach libpq untouched: with
``verify-full`` and the cluster's CA every transport works; ``sslmode=disable`` and a wrong CA are
refused with typed errors. A wrong password, a closed port and a bad option never put the
password into an error message, its traceback, a ``repr``, a worker's log or a CLI error line.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgque.conformance.servers.tls import TlsPostgres, Unavailable, self_signed
from pgque.core import ConnectionLost, Event, PgqueError, Worker, connect
from pgque.postgres import PostgresTransport
from pgque.postgres_async import AsyncPostgresTransport

PASSWORD = "Tls-S3cret-pw"
WRONG = "Wr0ng-S3cret-pw"


@pytest.fixture(scope="module")
def tls_pg() -> Iterator[TlsPostgres]:
    """Start the throwaway TLS cluster once for this module."""
    try:
        server = TlsPostgres(PASSWORD).start()
    except Unavailable as exc:
        pytest.skip(f"no throwaway PostgreSQL with TLS here: {exc}")
    yield server
    server.stop()


def _clean(error: BaseException, *secrets: str) -> None:
    """Assert no secret is in the error, its repr, or its whole formatted chain."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    for secret in secrets:
        assert secret not in str(error)
        assert secret not in repr(error)
        assert secret not in text, text


def _queue() -> str:
    return f"tls_{uuid.uuid4().hex[:12]}"


def test_verify_full_with_the_servers_ca_works_for_every_entry_point(tls_pg: TlsPostgres) -> None:
    url = tls_pg.url(sslmode="verify-full")
    with PostgresTransport.from_dsn(url, queue=_queue(), timeout=10) as transport:
        transport.publish("g", Event(kind="tls"))
        lease = transport.claim()
        assert lease is not None
        assert transport.ack(lease)
        assert PASSWORD not in repr(transport)
    with connect(f"{url}&queue={_queue()}&timeout=10") as via_url:
        assert via_url.stats().messages == 0


@pytest.mark.asyncio
async def test_the_asyncio_transport_passes_sslmode_through(tls_pg: TlsPostgres) -> None:
    url = tls_pg.url(sslmode="verify-full")
    transport = await AsyncPostgresTransport.from_dsn(url, queue=_queue(), timeout=10)
    try:
        await transport.publish("g", Event(kind="tls"))
        assert (await transport.stats()).messages == 1
        await transport.purge()
    finally:
        await transport.close()


def test_sslmode_disable_is_refused_by_a_tls_only_server(tls_pg: TlsPostgres) -> None:
    started = time.monotonic()
    with pytest.raises(ConnectionLost, match="no encryption") as caught:
        PostgresTransport.from_dsn(tls_pg.url(sslmode="disable"), timeout=10)
    # A refusal that cannot change is not retried until the timeout.
    assert time.monotonic() - started < 5
    _clean(caught.value, PASSWORD)


def test_a_certificate_from_another_ca_is_refused(tls_pg: TlsPostgres, tmp_path: Path) -> None:
    stranger = self_signed(tmp_path)
    url = tls_pg.url(sslmode="verify-full").replace(str(tls_pg.cert), str(stranger.cert))
    started = time.monotonic()
    with pytest.raises(ConnectionLost, match="certificate") as caught:
        PostgresTransport.from_dsn(url, timeout=10)
    # The certificate will not change: no retrying until the timeout.
    assert time.monotonic() - started < 5
    _clean(caught.value, PASSWORD)


def test_a_refused_password_is_never_shown(tls_pg: TlsPostgres) -> None:
    url = tls_pg.url(password=WRONG)
    started = time.monotonic()
    with pytest.raises(PgqueError, match="password authentication failed") as caught:
        PostgresTransport.from_dsn(url, timeout=10)
    assert time.monotonic() - started < 5
    _clean(caught.value, WRONG, PASSWORD)
    with pytest.raises(PgqueError) as via_connect:
        connect(f"{url}&timeout=10")
    _clean(via_connect.value, WRONG)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{PASSWORD}@127.0.0.1:9/app",
        f"postgresql://app:{PASSWORD}@127.0.0.1:9/app?sslmode=bogus",
        f"postgresql://app:{PASSWORD}@127.0.0.1:notaport/app",
        f"host=127.0.0.1 port=9 user=app password={PASSWORD} dbname=app",
        f"host=127.0.0.1 port=9 user=app password='{PASSWORD}' dbname=app",
    ],
)
def test_connect_errors_and_reprs_mask_the_password(url: str) -> None:
    transport = PostgresTransport(url, timeout=1)
    assert PASSWORD not in repr(transport)
    with pytest.raises(PgqueError) as caught:
        transport.stats()
    _clean(caught.value, PASSWORD)
    transport.close()
    asyncio_transport = AsyncPostgresTransport(url, timeout=1)
    assert PASSWORD not in repr(asyncio_transport)


def test_a_worker_logs_no_password(tls_pg: TlsPostgres, caplog: pytest.LogCaptureFixture) -> None:
    transport = PostgresTransport(tls_pg.url(password=WRONG), queue=_queue(), timeout=1)
    worker = Worker(transport, lambda event: None, idle_backoff=(0.05, 0.1))
    caplog.set_level(logging.DEBUG)
    runner = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False})
    runner.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "failed" not in caplog.text:
        time.sleep(0.05)
    worker.stop(graceful=False)
    runner.join(timeout=10)
    transport.close()
    assert "password authentication failed" in caplog.text
    for record in caplog.records:
        formatted = logging.Formatter().format(record)
        assert WRONG not in formatted
        assert PASSWORD not in formatted


def test_cli_error_lines_mask_the_password(tls_pg: TlsPostgres) -> None:
    script = Path(sys.executable).parent / "pgque"
    result = subprocess.run(
        [str(script), "stats", "--url", f"{tls_pg.url(password=WRONG)}&timeout=5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "password authentication failed" in result.stderr
    assert WRONG not in result.stderr + result.stdout
    assert ":***@" in result.stderr
