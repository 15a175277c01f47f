"""One connect timeout (``connect_timeout``, default 10 s): a PostgreSQL transport that cannot
reach its server gives up with ConnectionLost within it, retries included, whatever the
failure: a refused port, or a server that accepts and never sends its startup reply."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from pgque.core import connect, connect_async
from pgque.core.errors import ConnectionLost
from pgque.postgres import PostgresTransport
from pgque.postgres_async import AsyncPostgresTransport

#: What giving up may take beyond the timeout (the interpreter, a pause between attempts).
MARGIN = 2.0


@pytest.fixture
def silent_port() -> Iterator[int]:
    """Return the port of a local socket that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
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
            held.append(conn)  # kept open, never written to

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


@pytest.fixture
def closed_port() -> int:
    """Return a local port nothing listens on (connecting is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _url(port: int, query: str = "") -> str:
    return f"postgresql://postgres:pw@127.0.0.1:{port}/test?sslmode=disable{query}"


def _gives_up(url: str, within: float) -> str:
    started = time.monotonic()
    with pytest.raises(ConnectionLost) as info:
        # The blocking connect() opens at once (PostgresTransport.from_dsn).
        connect(url, queue="t_connect_timeout").stats()
    elapsed = time.monotonic() - started
    assert elapsed < within, f"gave up after {elapsed:.1f} s"
    message = str(info.value)
    assert "pw" not in message  # the URL is masked
    assert "127.0.0.1" in message
    return message


@pytest.mark.parametrize("port_kind", ["silent", "refused"])
def test_connect_timeout_in_the_url_bounds_opening(
    port_kind: str, silent_port: int, closed_port: int
) -> None:
    port = silent_port if port_kind == "silent" else closed_port
    message = _gives_up(_url(port, "&connect_timeout=1"), 1 + MARGIN)
    assert "1 s" in message


def test_connect_timeout_as_a_float(silent_port: int) -> None:
    message = _gives_up(_url(silent_port, "&connect_timeout=1.5"), 1.5 + MARGIN)
    assert "1.5 s" in message


def test_the_default_is_ten_seconds(silent_port: int) -> None:
    started = time.monotonic()
    message = _gives_up(_url(silent_port), 10 + MARGIN)
    assert time.monotonic() - started >= 9
    assert "10 s" in message


def test_timeout_is_an_alias_and_the_keyword_wins_over_nothing(closed_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(ConnectionLost, match="within 1 s"):
        PostgresTransport.from_dsn(_url(closed_port), timeout=1)
    with pytest.raises(ConnectionLost, match="within 1 s"):
        PostgresTransport.from_dsn(_url(closed_port), connect_timeout=1)
    assert time.monotonic() - started < 2 * (1 + MARGIN)


def test_both_names_must_agree() -> None:
    from pgque.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="connect_timeout"):
        PostgresTransport(_url(1), timeout=3, connect_timeout=4)


@pytest.mark.asyncio
@pytest.mark.parametrize("port_kind", ["silent", "refused"])
async def test_async_connect_timeout_in_the_url(
    port_kind: str, silent_port: int, closed_port: int
) -> None:
    port = silent_port if port_kind == "silent" else closed_port
    transport = connect_async(_url(port, "&connect_timeout=1"), queue="t_connect_timeout")
    started = time.monotonic()
    try:
        with pytest.raises(ConnectionLost, match=r"within 1 s"):
            await transport.stats()
    finally:
        await transport.close()
    assert time.monotonic() - started < 1 + MARGIN


@pytest.mark.asyncio
async def test_async_from_dsn_connect_timeout(silent_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(ConnectionLost, match=r"within 1 s"):
        await AsyncPostgresTransport.from_dsn(_url(silent_port), connect_timeout=1)
    assert time.monotonic() - started < 1 + MARGIN
    await asyncio.sleep(0)


def test_a_reachable_server_is_unaffected(postgres_url: str) -> None:
    sep = "&" if "?" in postgres_url else "?"
    with connect(f"{postgres_url}{sep}connect_timeout=1", queue="t_connect_timeout") as t:
        assert t.stats().messages >= 0


@pytest.mark.parametrize("name", ["connect_timeout", "timeout"])
def test_the_urls_connect_timeout_wins_over_the_commands(name: str) -> None:
    from pgque.core.cli.commands import quick_options

    options = quick_options(f"postgresql://h/db?{name}=1", {}, timeout=7.0)
    assert "timeout" not in options
    assert "connect_timeout" not in options
    assert quick_options("postgresql://h/db", {}, timeout=7.0)["timeout"] == 7.0
