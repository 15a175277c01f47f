"""One connect timeout (``connect_timeout``, default 10 s): a Redis transport that cannot reach
its server gives up with ConnectionLost within it, retries included, whatever the failure: a
refused port, a server that accepts and never answers, a TLS handshake that never completes
(``rediss://`` to a socket that never replies), a Unix socket that never answers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgque.core import connect, connect_async
from pgque.core.errors import ConnectionLost
from pgque.redis import AsyncRedisTransport, RedisBackend, RedisTransport

#: What giving up may take beyond the timeout (the interpreter, a pause between attempts).
MARGIN = 2.0


def _silent(family: int, address: tuple[str, int] | str) -> Iterator[socket.socket]:
    """Yield a listening socket that accepts connections and never writes a byte."""
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """Return the port of a local TCP socket that accepts and never answers."""
    for server in _silent(socket.AF_INET, ("127.0.0.1", 0)):
        yield server.getsockname()[1]


@pytest.fixture
def silent_path(tmp_path: Path) -> Iterator[str]:
    """Return the path of a Unix socket that accepts and never answers."""
    path = str(tmp_path / "silent.sock")
    for _server in _silent(socket.AF_UNIX, path):
        yield path


@pytest.fixture
def closed_port() -> int:
    """Return a local port nothing listens on (connecting is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _gives_up(url: str, within: float, **options: object) -> str:
    started = time.monotonic()
    transport = connect(url, queue="t_connect_timeout", **options)
    try:
        with pytest.raises(ConnectionLost) as info:
            transport.stats()
    finally:
        transport.close()
    elapsed = time.monotonic() - started
    assert elapsed < within, f"gave up after {elapsed:.1f} s"
    message = str(info.value)
    assert "sekrit" not in message  # the URL is masked
    return message


def test_rediss_to_a_server_that_never_completes_the_handshake(silent_port: int) -> None:
    url = f"rediss://:sekrit@127.0.0.1:{silent_port}/0?connect_timeout=1&ssl_cert_reqs=none"
    message = _gives_up(url, 1 + MARGIN)
    assert "127.0.0.1" in message
    assert "1 s" in message


def test_a_server_that_never_answers(silent_port: int) -> None:
    message = _gives_up(f"redis://:sekrit@127.0.0.1:{silent_port}/0?connect_timeout=1.5", 3.5)
    assert "1.5 s" in message


def test_a_unix_socket_that_never_answers(silent_path: str) -> None:
    _gives_up(f"unix://{silent_path}?connect_timeout=1", 1 + MARGIN)


def test_refused_retries_stop_at_the_deadline(closed_port: int) -> None:
    # 100 retries would pause minutes; the connect timeout stops them.
    url = f"redis://:sekrit@127.0.0.1:{closed_port}/0?connect_timeout=1&retries=100"
    _gives_up(url, 1 + MARGIN)


def test_a_cluster_seed_refused(closed_port: int) -> None:
    url = f"redis+cluster://127.0.0.1:{closed_port}/?connect_timeout=1&retries=100"
    _gives_up(url, 1 + MARGIN)


def test_the_keyword_and_the_default(silent_port: int) -> None:
    url = f"rediss://127.0.0.1:{silent_port}/0?ssl_cert_reqs=none"
    started = time.monotonic()
    with pytest.raises(ConnectionLost, match="1 s"):
        RedisTransport(url, connect_timeout=1).stats()
    assert time.monotonic() - started < 1 + MARGIN
    started = time.monotonic()
    with pytest.raises(ConnectionLost, match="10 s"):
        RedisTransport(url).stats()
    assert 9 <= time.monotonic() - started < 10 + MARGIN


@pytest.mark.asyncio
@pytest.mark.parametrize("scheme", ["redis", "rediss"])
async def test_async_never_answering(scheme: str, silent_port: int) -> None:
    url = f"{scheme}://127.0.0.1:{silent_port}/0?connect_timeout=1&ssl_cert_reqs=none"
    if scheme == "redis":
        url = url.replace("&ssl_cert_reqs=none", "")
    transport = connect_async(url, queue="t_connect_timeout")
    started = time.monotonic()
    try:
        with pytest.raises(ConnectionLost, match="1 s"):
            await transport.stats()
    finally:
        await transport.close()
    assert time.monotonic() - started < 1 + MARGIN


@pytest.mark.asyncio
async def test_async_refused_stops_at_the_deadline(closed_port: int) -> None:
    transport = AsyncRedisTransport(
        f"redis://127.0.0.1:{closed_port}/0", connect_timeout=1, retries=100
    )
    started = time.monotonic()
    try:
        with pytest.raises(ConnectionLost):
            await transport.stats()
    finally:
        await transport.close()
    assert time.monotonic() - started < 1 + MARGIN


def test_a_command_gives_its_transport_the_connect_timeout() -> None:
    command_options: Callable[[float, bool], dict[str, object]] | None
    command_options = RedisBackend.command_options
    assert command_options is not None
    assert command_options(3.0, True)["connect_timeout"] == 3.0


def test_a_reachable_server_is_unaffected(redis_url: str) -> None:
    sep = "&" if "?" in redis_url else "?"
    with RedisTransport(f"{redis_url}{sep}connect_timeout=0.5", queue="t_connect_timeout") as t:
        assert t.stats().messages >= 0
