"""TLS and secrets on Redis, against a throwaway ``redis-server`` (never the shared one).

The server (:class:`pgque.conformance.servers.tls.TlsRedis`) has only a TLS port and a password.
``rediss://`` with the server's CA (``ssl_ca_certs``) works for every entry point; plain
``redis://`` to the TLS port and a foreign CA fail with typed errors. A wrong password, a closed
port and an unknown option never put the password into an error, its traceback, a ``repr``, a
worker's log or a CLI error line.
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

from pgque.conformance.servers.tls import TlsRedis, Unavailable, self_signed
from pgque.core import ConfigurationError, ConnectionLost, Event, PgqueError, Worker, connect
from pgque.redis import AsyncRedisTransport, RedisTransport

PASSWORD = "Tls-S3cret-pw"
WRONG = "Wr0ng-S3cret-pw"


@pytest.fixture(scope="module")
def tls_redis() -> Iterator[TlsRedis]:
    """Start the throwaway TLS server once for this module."""
    try:
        server = TlsRedis(PASSWORD).start()
    except Unavailable as exc:
        pytest.skip(f"no redis-server with TLS here: {exc}")
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


def test_rediss_with_the_servers_ca_works_for_every_entry_point(tls_redis: TlsRedis) -> None:
    url = tls_redis.url()
    with RedisTransport(url, queue=_queue()) as transport:
        transport.publish("g", Event(kind="tls"))
        lease = transport.claim()
        assert lease is not None
        assert transport.ack(lease)
        assert PASSWORD not in repr(transport)
        transport.purge()
    with connect(f"{url}&queue={_queue()}") as via_url:
        assert via_url.stats().messages == 0


@pytest.mark.asyncio
async def test_the_asyncio_transport_speaks_tls(tls_redis: TlsRedis) -> None:
    transport = AsyncRedisTransport(tls_redis.url(), queue=_queue())
    try:
        await transport.publish("g", Event(kind="tls"))
        assert (await transport.stats()).messages == 1
        assert PASSWORD not in repr(transport)
        await transport.purge()
    finally:
        await transport.close()


def test_plain_redis_to_the_tls_port_fails_typed(tls_redis: TlsRedis) -> None:
    transport = RedisTransport(f"{tls_redis.url(scheme='redis')}?retries=0", queue=_queue())
    with pytest.raises(PgqueError) as caught:
        transport.stats()
    _clean(caught.value, PASSWORD)
    transport.close()


def test_a_certificate_from_another_ca_is_refused(tls_redis: TlsRedis, tmp_path: Path) -> None:
    stranger = self_signed(tmp_path)
    url = tls_redis.url().replace(str(tls_redis.cert), str(stranger.cert)) + "&retries=0"
    transport = RedisTransport(url, queue=_queue())
    with pytest.raises(ConnectionLost, match="certificate") as caught:
        transport.stats()
    _clean(caught.value, PASSWORD)
    transport.close()


def test_a_refused_password_is_never_shown(tls_redis: TlsRedis) -> None:
    transport = RedisTransport(tls_redis.url(password=WRONG), queue=_queue())
    assert WRONG not in repr(transport)
    with pytest.raises(PgqueError) as caught:
        transport.stats()
    _clean(caught.value, WRONG, PASSWORD)
    transport.close()


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@127.0.0.1:9/0?retries=0",
        f"redis://user:{PASSWORD}@127.0.0.1:9/0?retries=0",
        f"rediss://:{PASSWORD}@127.0.0.1:9/0?retries=0",
    ],
)
def test_connect_errors_and_reprs_mask_the_password(url: str) -> None:
    transport = RedisTransport(url)
    assert PASSWORD not in repr(transport)
    assert PASSWORD not in repr(AsyncRedisTransport(url))
    with pytest.raises(ConnectionLost) as caught:
        transport.stats()
    _clean(caught.value, PASSWORD)
    transport.close()


def test_an_invalid_option_does_not_echo_the_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        RedisTransport(f"redis://:{PASSWORD}@127.0.0.1:9/0?no_such_option=1")
    _clean(caught.value, PASSWORD)


def test_a_worker_logs_no_password(tls_redis: TlsRedis, caplog: pytest.LogCaptureFixture) -> None:
    transport = RedisTransport(tls_redis.url(password=WRONG), queue=_queue(), retries=0)
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
    assert "failed" in caplog.text
    for record in caplog.records:
        formatted = logging.Formatter().format(record)
        assert WRONG not in formatted
        assert PASSWORD not in formatted


def test_cli_error_lines_mask_the_password(tls_redis: TlsRedis) -> None:
    script = Path(sys.executable).parent / "pgque"
    result = subprocess.run(
        [str(script), "stats", "--url", tls_redis.url(password=WRONG)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert WRONG not in result.stderr + result.stdout
    assert ":***@" in result.stderr
