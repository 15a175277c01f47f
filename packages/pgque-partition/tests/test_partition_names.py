"""The public names follow pgque.core's: the blocking one is plain, the asyncio one ``_async``."""

from __future__ import annotations

import inspect

from pgque.core import AsyncInMemoryTransport, InMemoryTransport
from pgque.partition import (
    AsyncPartitionBackend,
    PartitionBackend,
    partition_backend,
    partition_backend_async,
)


def test_partition_backend_is_blocking_and_partition_backend_async_is_asyncio() -> None:
    with InMemoryTransport() as transport:
        backend = partition_backend(transport)
        assert isinstance(backend, PartitionBackend)
        assert not inspect.iscoroutinefunction(backend.purge)
    abackend = partition_backend_async(AsyncInMemoryTransport())
    assert isinstance(abackend, AsyncPartitionBackend)
    assert inspect.iscoroutinefunction(abackend.purge)
