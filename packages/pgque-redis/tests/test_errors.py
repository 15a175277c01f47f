"""Connection failures become ConnectionLost after bounded retries; secrets never leak."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from pgque.core import ConfigurationError, ConnectionLost, Event, Lease, PgqueError
from pgque.redis import AsyncRedisTransport, RedisTransport
from pgque.redis._errors import nothing_sent

SECRET = "s3cret-pw"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def hanging_up_server() -> Iterator[tuple[int, list[int]]]:
    """A TCP server that accepts connections and closes them at once (a crashing Redis)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    accepted = [0]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted[0] += 1
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


def test_closed_port_raises_connection_lost_after_bounded_retries() -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{_closed_port()}/0?retries=3&retry_backoff=0.02"
    transport = RedisTransport(url)
    started = time.monotonic()
    with pytest.raises(ConnectionLost) as info:
        transport.publish("g", Event(kind="k"))
    elapsed = time.monotonic() - started
    # 3 retries pausing 0.02, 0.04, 0.08 s: bounded, and really retried.
    assert 0.12 <= elapsed < 3.0
    assert isinstance(info.value.__cause__, redis.ConnectionError)
    assert SECRET not in str(info.value)
    assert "***" in str(info.value)
    assert SECRET not in repr(transport)
    transport.close()


def test_no_retries_fails_fast() -> None:
    transport = RedisTransport(f"redis://127.0.0.1:{_closed_port()}/0", retries=0)
    started = time.monotonic()
    with pytest.raises(ConnectionLost) as refused:
        transport.stats()
    assert refused.value.maybe_applied is False  # nothing reached a server
    assert time.monotonic() - started < 2.0
    transport.close()


def test_unknown_unix_socket_raises_connection_lost(tmp_path: object) -> None:
    transport = RedisTransport(f"unix://{tmp_path}/missing.sock?retries=1&retry_backoff=0")
    with pytest.raises(ConnectionLost):
        transport.claim()
    transport.close()


def _settled(counter: list[int], expected: int) -> int:
    """Wait until the server thread has accepted *expected* connections (or 3 s passed)."""
    deadline = time.monotonic() + 3.0
    while counter[0] < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # a connection beyond the expected ones would show up by now
    return counter[0]


def test_write_cut_mid_command_is_not_repeated(
    hanging_up_server: tuple[int, list[int]],
) -> None:
    """A write whose outcome is unknown fails at once; a read is retried first."""
    port, accepted = hanging_up_server
    transport = RedisTransport(f"redis://127.0.0.1:{port}/0?retries=3&retry_backoff=0.01")
    # Its server once reached (the first contact's PING answered): the write goes out.
    transport.driver._reached = True
    with pytest.raises(ConnectionLost, match="may or may not") as cut:
        transport.publish("g", Event(kind="k"))
    assert cut.value.maybe_applied is True
    assert _settled(accepted, 1) == 1  # one attempt: never sent twice
    with pytest.raises(ConnectionLost):
        transport.stats()
    assert _settled(accepted, 5) == 5  # the first attempt and 3 retries of the read
    transport.close()


def _lease() -> Lease:
    return Lease(
        group_id="g",
        message_id=1,
        event=Event(kind="k"),
        token="t",
        priority=0,
        attempt=1,
        expires_at=0.0,
        queue="default",
        origin="redis:test-store",
    )


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("release", lambda t: t.release(_lease())),
        ("nack", lambda t: t.nack(_lease(), error="boom")),
        ("dead_letter", lambda t: t.dead_letter(_lease(), "r", error=ValueError("x"))),
        ("pause", lambda t: t.pause("g")),
        ("resume", lambda t: t.resume("g")),
        ("delete_dead_letters", lambda t: t.delete_dead_letters([1])),
        ("redrive", lambda t: t.redrive(in_place=True)),
        ("redrive_tail", lambda t: t.redrive([1], in_place=False)),
        ("claim_holder", lambda t: t.claim(holder="h")),
    ],
)
def test_every_new_write_cut_mid_command_may_have_been_applied(
    hanging_up_server: tuple[int, list[int]], name: str, write: object
) -> None:
    """Issue 14's writes are never repeated after a lost reply: ConnectionLost says the write
    may have been applied (pause would answer False to its own repeat, delete_dead_letters 0)."""
    port, accepted = hanging_up_server
    transport = RedisTransport(f"redis://127.0.0.1:{port}/0?retries=3&retry_backoff=0.01")
    transport._origin = "redis:test-store"  # its store known: the write is the first call
    transport.driver._reached = True  # and its server reached (the first contact's PING answered)
    with pytest.raises(ConnectionLost, match="may or may not") as cut:
        write(transport)  # type: ignore[operator]
    assert cut.value.maybe_applied is True, name
    assert _settled(accepted, 1) == 1  # one attempt: never sent twice
    transport.close()


@pytest.mark.parametrize(
    "read",
    [
        lambda t: t.group("g"),
        lambda t: t.groups(state="parked"),
        lambda t: t.dead_letters(after=3),
    ],
    ids=["group", "groups", "dead_letters"],
)
def test_the_new_reads_are_retried(hanging_up_server: tuple[int, list[int]], read: object) -> None:
    port, accepted = hanging_up_server
    transport = RedisTransport(f"redis://127.0.0.1:{port}/0?retries=2&retry_backoff=0.01")
    with pytest.raises(ConnectionLost):
        read(transport)  # type: ignore[operator]
    assert _settled(accepted, 3) == 3  # the first attempt and 2 retries
    transport.close()


@pytest.mark.asyncio
async def test_async_closed_port_raises_connection_lost() -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{_closed_port()}/0?retries=2&retry_backoff=0.01"
    transport = AsyncRedisTransport(url)
    with pytest.raises(ConnectionLost) as info:
        await transport.claim()
    assert isinstance(info.value.__cause__, redis.ConnectionError)
    assert SECRET not in str(info.value)
    await transport.close()


def test_wrong_password_is_a_configuration_error(redis_url: str) -> None:
    if not redis_url.startswith("redis://") or "@" in redis_url:
        pytest.skip("needs a password-less TCP server")
    url = redis_url.replace("redis://", f"redis://nobody:{SECRET}@", 1)
    transport = RedisTransport(url, retries=0)
    with pytest.raises(PgqueError) as info:
        transport.stats()
    assert isinstance(info.value, (ConfigurationError, ConnectionLost))
    assert SECRET not in str(info.value)
    transport.close()


def test_redis_errors_are_wrapped(transport_factory: object, raw_client: redis.Redis) -> None:
    transport = transport_factory()  # type: ignore[operator]
    # A key of the wrong type makes the script fail inside Redis.
    raw_client.set(transport.key_prefix + "seq", "not a number")
    with pytest.raises(PgqueError) as info:
        transport.publish("g", Event(kind="k"))
    assert isinstance(info.value.__cause__, redis.RedisError)
    assert not isinstance(info.value, ConnectionLost)


def test_only_failures_before_sending_count_as_nothing_sent() -> None:
    assert nothing_sent(redis.ConnectionError("Error 111 connecting to h:1. Connection refused."))
    assert nothing_sent(redis.TimeoutError("Timeout connecting to server"))
    assert nothing_sent(redis.BusyLoadingError("Redis is loading the dataset in memory"))
    assert not nothing_sent(redis.ConnectionError("Connection closed by server."))
    assert not nothing_sent(redis.TimeoutError("Timeout reading from socket"))
