"""partition_backend finds each transport's adapter through the entry-point group
``pgque.partition_adapters``: every backend's own, a registered newcomer's, the generic one for
a transport nobody serves; a broken registration fails with ConfigurationError.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _partition_support import AMake, Make

from pgque.core import ConfigurationError, Event, InvalidInput
from pgque.core.memory import (
    AsyncInMemoryTransport,
    AsyncMemoryPartitionAdapter,
    InMemoryTransport,
    MemoryPartitionAdapter,
)
from pgque.core.partition_base import AsyncPartitionAdapterBase, PartitionAdapterBase
from pgque.partition import (
    AsyncPartitionBackend,
    Exclusive,
    KeyedPublisher,
    PartitionBackend,
    PartitionConsumer,
    partition_backend,
    partition_backend_async,
)
from pgque.postgres import PostgresPartitionAdapter
from pgque.postgres_async import AsyncPostgresPartitionAdapter
from pgque.redis import AsyncRedisPartitionAdapter, RedisPartitionAdapter

ADAPTERS = {
    "memory": (MemoryPartitionAdapter, AsyncMemoryPartitionAdapter, "memory"),
    "postgres": (PostgresPartitionAdapter, AsyncPostgresPartitionAdapter, "postgresql"),
    "redis": (RedisPartitionAdapter, AsyncRedisPartitionAdapter, "redis"),
}


def test_each_backend_serves_its_blocking_transports(transport_factory: Make, backend: str) -> None:
    adapter = partition_backend(transport_factory())
    blocking, _, name = ADAPTERS[backend]
    assert type(adapter) is blocking
    assert isinstance(adapter, PartitionBackend)
    assert (adapter.name, adapter.key_locks) == (name, True)


@pytest.mark.asyncio
async def test_each_backend_serves_its_asyncio_transports(
    async_transport_factory: AMake, backend: str
) -> None:
    adapter = partition_backend_async(await async_transport_factory())
    _, asyncio, name = ADAPTERS[backend]
    assert type(adapter) is asyncio
    assert isinstance(adapter, AsyncPartitionBackend)
    assert (adapter.name, adapter.key_locks) == (name, True)


def test_a_subclass_of_a_served_transport_gets_its_adapter() -> None:
    class Audited(InMemoryTransport):
        pass

    with Audited() as transport:
        assert type(partition_backend(transport)) is MemoryPartitionAdapter


class Unserved:
    """A blocking transport no adapter serves: it forwards to an in-memory one."""

    def __init__(self) -> None:
        self.inner = InMemoryTransport()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_transport_nobody_serves_gets_the_generic_adapter() -> None:
    transport: Any = Unserved()
    adapter = partition_backend(transport)
    assert type(adapter) is PartitionAdapterBase
    assert (adapter.name, adapter.key_locks) == ("generic", False)
    publisher = KeyedPublisher(transport)
    message_id, deduped = publisher.send("k", partition_key="a")  # plain publishes work
    assert not deduped
    assert transport.inner.claim().message_id == message_id
    with pytest.raises(ConfigurationError, match="has no dedup window"):
        publisher.send("k", partition_key="a", dedup_key="d", dedup_ttl=5)
    with pytest.raises(InvalidInput, match="needs a key lock"):
        PartitionConsumer(transport, lambda event: None, tier=Exclusive())
    assert type(partition_backend_async(transport)) is AsyncPartitionAdapterBase


def test_the_other_flavour_is_refused() -> None:
    with pytest.raises(InvalidInput, match="is an asyncio transport; use partition_backend_async"):
        partition_backend(AsyncInMemoryTransport())  # type: ignore[arg-type]
    with (
        InMemoryTransport() as transport,
        pytest.raises(InvalidInput, match="is a blocking transport; use partition_backend"),
    ):
        partition_backend_async(transport)  # type: ignore[arg-type]


NEWCOMER = '''
"""A backend that is no part of pgque, with its own partition adapter."""
from pgque.core.memory import InMemoryTransport
from pgque.core.partition_base import PartitionAdapterBase


class NewTransport(InMemoryTransport):
    pass


class OtherTransport(InMemoryTransport):
    pass


class NewAdapter(PartitionAdapterBase):
    name = "newcomer"

    def __init__(self, transport, *, lock_pool=None):
        super().__init__(transport, lock_pool=lock_pool)
        self.lock_pool = lock_pool

    def publish(self, group_id, event, priority, dedup):
        return self.transport.publish(group_id, event, priority=priority), dedup is not None


def not_an_adapter(transport, *, lock_pool=None):
    return "not an adapter"
'''


@pytest.fixture
def newcomer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Register the NEWCOMER backend's adapters through a generated ``.dist-info``."""
    (tmp_path / "pgque_newcomer.py").write_text(textwrap.dedent(NEWCOMER), encoding="utf-8")
    info = tmp_path / "pgque_newcomer-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pgque-newcomer\nVersion: 0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[pgque.partition_adapters]\n"
        "pgque_newcomer.NewTransport = pgque_newcomer:NewAdapter\n"
        "pgque_newcomer.OtherTransport = pgque_newcomer:not_an_adapter\n"
        "pgque_newcomer.Missing = pgque_newcomer_gone:Adapter\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("pgque_newcomer")
    sys.modules.pop("pgque_newcomer", None)


def test_a_newcomer_plugs_in_through_the_entry_point_group(newcomer: Any) -> None:
    pool = object()
    with newcomer.NewTransport() as transport:
        adapter: Any = partition_backend(transport, lock_pool=pool)
        assert type(adapter) is newcomer.NewAdapter
        assert adapter.lock_pool is pool
        assert adapter.publish("g", Event(kind="k"), 0, ("d", 1.0))[1] is True
        # A more specific registration wins over the base class's (memory's).
        assert KeyedPublisher(transport).backend.name == "newcomer"


def test_a_registration_that_is_no_adapter_is_refused(newcomer: Any) -> None:
    with newcomer.OtherTransport() as transport:
        with pytest.raises(ConfigurationError, match="does not implement"):
            partition_backend(transport)


def test_a_registration_that_fails_to_import_is_refused(newcomer: Any) -> None:
    class Missing(InMemoryTransport):
        pass

    newcomer.Missing = Missing
    with Missing() as transport:
        with pytest.raises(ConfigurationError, match="failed to import"):
            partition_backend(transport)


def test_the_memory_adapter_is_found_without_importing_a_driver() -> None:
    code = textwrap.dedent(
        """
        import sys
        from pgque.core.memory import InMemoryTransport
        from pgque.partition import partition_backend

        assert type(partition_backend(InMemoryTransport())).__name__ == "MemoryPartitionAdapter"
        loaded = sorted(m for m in ("psycopg", "redis", "pgque.postgres", "pgque.redis")
                        if m in sys.modules)
        assert not loaded, loaded
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
