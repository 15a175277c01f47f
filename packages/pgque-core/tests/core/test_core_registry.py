"""connect() / connect_async(): scheme lookup, URL options, settings and helpful errors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pytest

from pgque.core import (
    AsyncInMemoryTransport,
    AsyncTransport,
    Backend,
    ConfigurationError,
    Event,
    InMemoryTransport,
    Transport,
    connect,
    connect_async,
    registry,
)
from pgque.core.registry import ENTRY_POINT_GROUP, KNOWN_SCHEMES


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the developer's environment and .env file out of these tests."""
    for name in ("PGQUE_URL", "PGQUE_QUEUE", "PGQUE_MAX_ATTEMPTS", "PGQUE_ON_EXHAUSTED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _only(*schemes: str) -> Any:
    """Return an entry_points() stand-in that sees only the installed *schemes*."""

    def only(*, group: str, name: str) -> list[EntryPoint]:
        return [ep for ep in entry_points(group=group, name=name) if ep.name in schemes]

    return only


def _fake(name: str, value: str) -> Any:
    def one(**selection: Any) -> list[EntryPoint]:
        if selection.get("name") != name:
            return []
        return [EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)]

    return one


def test_memory_entry_point_is_registered() -> None:
    [ep] = list(entry_points(group=ENTRY_POINT_GROUP, name="memory"))
    backend = ep.load()
    assert isinstance(backend, Backend)
    assert backend.package == "pgque-core"
    assert backend.open is not None
    assert backend.open_async is not None


def test_connect_memory() -> None:
    with connect("memory://") as transport:
        assert isinstance(transport, InMemoryTransport)
        assert isinstance(transport, Transport)
        assert transport.queue == "default"
        transport.publish("g", Event(kind="k"))
        lease = transport.claim()
        assert lease is not None
        assert transport.ack(lease)


@pytest.mark.asyncio
async def test_connect_async_memory() -> None:
    transport = connect_async("memory://?queue=jobs")
    assert isinstance(transport, AsyncInMemoryTransport)
    assert isinstance(transport, AsyncTransport)
    async with transport:
        assert transport.queue == "jobs"
        await transport.publish("g", Event(kind="k"))
        lease = await transport.claim()
        assert lease is not None
        assert await transport.ack(lease)


def test_named_memory_store_is_shared() -> None:
    name = f"shared-{uuid.uuid4().hex}"
    producer = connect(f"memory://{name}?queue=orders")
    consumer = connect(f"memory://{name}?queue=orders")
    producer.publish("g", Event(kind="k", data={"n": 1}))
    lease = consumer.claim()
    assert lease is not None
    assert lease.event.data == {"n": 1}
    assert producer.ack(lease)  # the same store, so either worker may settle it
    other_queue = connect(f"memory://{name}?queue=billing")
    other_queue.publish("g", Event(kind="k"))
    assert consumer.claim() is None


@pytest.mark.asyncio
async def test_named_memory_store_is_shared_between_flavours() -> None:
    name = f"shared-{uuid.uuid4().hex}"
    connect(f"memory://{name}").publish("g", Event(kind="k"))
    transport = connect_async(f"memory://{name}")
    assert await transport.claim() is not None


def test_plain_memory_urls_are_private() -> None:
    first = connect("memory://")
    second = connect("memory://")
    first.publish("g", Event(kind="k"))
    assert second.claim() is None


def test_query_options_become_transport_options() -> None:
    transport = connect("memory://?queue=orders&max_attempts=3")
    assert transport.queue == "orders"
    transport.publish("g", Event(kind="k"))
    for _ in range(3):
        lease = transport.claim()
        assert lease is not None
        assert transport.nack(lease)
    assert transport.claim() is None
    assert [d.reason for d in transport.dead_letters()] == ["max_attempts (3) exhausted"]


def test_block_policy_from_query() -> None:
    transport = connect("memory://?max_attempts=1&on_exhausted=block")
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease)
    assert transport.claim() is None
    assert transport.stats().blocked == 1


def test_keyword_options_override_the_query() -> None:
    transport = connect("memory://?queue=orders&max_attempts=none", queue="billing")
    assert transport.queue == "billing"


def test_max_attempts_defaults_to_ten_and_none_is_unlimited() -> None:
    assert connect("memory://").max_attempts == 10
    assert connect("memory://?max_attempts=none").max_attempts is None
    assert connect("memory://?max_attempts=").max_attempts is None
    assert connect("memory://?max_attempts=4").max_attempts == 4
    assert connect("memory://", max_attempts=None).max_attempts is None


def test_max_attempts_from_settings_only_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGQUE_MAX_ATTEMPTS", raising=False)
    monkeypatch.setenv("PGQUE_URL", "memory://?max_attempts=3")
    assert connect().max_attempts == 3  # the default of the setting does not hide the URL's
    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", "none")
    assert connect().max_attempts is None
    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", "7")
    assert connect().max_attempts == 7
    assert connect_async().max_attempts == 7


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("memory://?max_attempts=abc", "max_attempts must be an integer"),
        ("memory://?max_attempts=0", "max_attempts"),
        ("memory://?queue=Not%20Valid", "queue name"),
        ("memory://?on_exhausted=explode", "on_exhausted"),
        ("memory://?colour=red", "invalid option"),
    ],
)
def test_bad_options_are_configuration_errors(url: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        connect(url)
    with pytest.raises(ConfigurationError, match=match):
        connect_async(url)


def test_unknown_scheme_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        connect("ftp://user:hunter2@host/queue")
    message = str(info.value)
    assert "unknown queue URL scheme 'ftp'" in message
    for scheme in KNOWN_SCHEMES:
        assert f"{scheme}://" in message
    assert "hunter2" not in message


@pytest.mark.parametrize(
    ("url", "package"),
    [
        ("redis://localhost:6379/0", "pgque-redis"),
        ("rediss://localhost:6380/0", "pgque-redis"),
        ("unix:///tmp/redis.sock", "pgque-redis"),
        ("postgresql://localhost/db", "pgque-postgres"),
        ("postgres://localhost/db", "pgque-postgres"),
    ],
)
def test_missing_backend_names_the_package(
    monkeypatch: pytest.MonkeyPatch, url: str, package: str
) -> None:
    # Other packages of this repository may be installed here; hide them so the check holds.
    monkeypatch.setattr(registry, "entry_points", _only("memory"))
    hint = rf"pip install {package} \(.*: pip install --find-links dist {package}\)$"
    with pytest.raises(ConfigurationError, match=hint):
        connect(url)


def test_missing_async_backend_names_the_async_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", _only("memory"))
    with pytest.raises(ConfigurationError, match=r"--find-links dist pgque-postgres-async\)$"):
        connect_async("postgresql://localhost/db")
    with pytest.raises(ConfigurationError, match="asyncio transport for redis://"):
        connect_async("redis://localhost")


def test_backend_with_only_the_other_flavour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", _fake("redis", f"{__name__}:ASYNC_ONLY_BACKEND"))
    with pytest.raises(ConfigurationError, match="no blocking transport for redis://"):
        connect("redis://localhost")
    assert isinstance(connect_async("redis://localhost"), AsyncInMemoryTransport)


def test_entry_point_that_fails_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", _fake("redis", "pgque_no_such_module:B"))
    with pytest.raises(ConfigurationError, match="failed to import"):
        connect("redis://localhost")


def test_entry_point_that_is_not_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", _fake("redis", "pgque.core:Event"))
    with pytest.raises(ConfigurationError, match="is not a pgque Backend"):
        connect("redis://localhost")


def _async_memory(url: str, **options: Any) -> AsyncInMemoryTransport:
    return AsyncInMemoryTransport(**options)


ASYNC_ONLY_BACKEND = Backend(package="pgque-test", open_async=_async_memory)


def test_no_url_reads_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"env-{uuid.uuid4().hex}"
    monkeypatch.setenv("PGQUE_URL", f"memory://{name}")
    monkeypatch.setenv("PGQUE_QUEUE", "from_env")
    monkeypatch.setenv("PGQUE_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("PGQUE_ON_EXHAUSTED", "block")
    transport = connect()
    assert transport.queue == "from_env"
    transport.publish("g", Event(kind="k"))
    lease = transport.claim()
    assert lease is not None
    assert transport.nack(lease)
    assert transport.claim() is None
    assert transport.stats().blocked == 1
    # The named store is shared, so the settings really picked memory://NAME.
    assert connect(f"memory://{name}?queue=from_env").stats().messages == 1
    assert connect_async().queue == "from_env"


def test_no_url_and_no_settings_is_private_memory() -> None:
    transport = connect()
    assert isinstance(transport, InMemoryTransport)
    assert transport.queue == "default"


def test_settings_override_url_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGQUE_URL", "memory://?queue=from_url")
    assert connect().queue == "from_url"
    monkeypatch.setenv("PGQUE_QUEUE", "from_setting")
    assert connect().queue == "from_setting"
    assert connect(queue="from_keyword").queue == "from_keyword"


@pytest.fixture
def _env_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / ".env"
    path.write_text("PGQUE_URL=memory://?queue=from_dotenv\n")
    yield path
    path.unlink()


@pytest.mark.usefixtures("_env_file")
def test_dotenv_file_is_read() -> None:
    assert connect().queue == "from_dotenv"
