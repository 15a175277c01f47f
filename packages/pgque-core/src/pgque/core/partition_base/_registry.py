"""Find and open a transport's partition adapter: the ``pgque.partition_adapters`` entry named
after the nearest class of its MRO by its public path (``pgque.redis.RedisTransport``). Only an
imported module can name a transport's class: a memory transport's lookup imports no driver.

pgque.partition's ``partition_backend`` / ``partition_backend_async`` and the tasks' dedup
window (``defer(..., dedup_key=)``) open adapters through these."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

from pgque.core.contract import AsyncTransport, Transport
from pgque.core.errors import ConfigurationError, InvalidInput
from pgque.core.partition_base._async import AsyncPartitionAdapterBase
from pgque.core.partition_base._sync import PartitionAdapterBase

__all__ = ["ENTRY_POINT_GROUP", "adapter_for", "adapter_for_async"]

#: The entry-point group of the partition adapters: name = a transport class
#: (``pgque.redis.RedisTransport``), value = the adapter class serving it.
ENTRY_POINT_GROUP = "pgque.partition_adapters"

_Adapter = TypeVar("_Adapter")


def _registered(transport: object, generic: type) -> Any:
    """Return the adapter class registered for *transport*'s class or a base, else *generic*;
    raise ConfigurationError when its entry point fails to import or is not callable."""
    served: dict[type, EntryPoint] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        module, _, name = entry.name.rpartition(".")
        cls = getattr(sys.modules[module], name, None) if module in sys.modules else None
        if isinstance(cls, type) and isinstance(transport, cls):
            served.setdefault(cls, entry)
    ep = next((served[cls] for cls in type(transport).__mro__ if cls in served), None)
    if ep is None:
        return generic
    try:
        factory = ep.load()
    except ImportError as exc:
        raise ConfigurationError(
            f"the partition adapter of {ep.name} ({ep.value}) failed to import: {exc}"
        ) from exc
    if not callable(factory):
        raise ConfigurationError(f"entry point {ep.name} = {ep.value} is not callable")
    return factory


def _open(transport: object, lock_pool: Any, flavour: type[_Adapter]) -> _Adapter:
    adapter = _registered(transport, flavour)(transport, lock_pool=lock_pool)
    name = type(transport).__name__
    if isinstance(adapter, flavour):
        return adapter
    if isinstance(adapter, AsyncPartitionAdapterBase):
        raise InvalidInput(f"{name} is an asyncio transport; use partition_backend_async")
    if isinstance(adapter, PartitionAdapterBase):
        raise InvalidInput(f"{name} is a blocking transport; use partition_backend")
    base = f"pgque.core.partition_base.{flavour.__name__}"
    raise ConfigurationError(f"{type(adapter).__name__} of {name} does not implement {base}")


def adapter_for(transport: Transport, *, lock_pool: Any = None) -> PartitionAdapterBase:
    """Return *transport*'s partition adapter: its backend's, else the generic one (plain
    publishes only). *lock_pool*: a psycopg pool for PostgreSQL's key locks (default: the
    transport's own). Raises InvalidInput for an asyncio transport that has an adapter,
    ConfigurationError when a registered adapter fails to load or is none."""
    return _open(transport, lock_pool, PartitionAdapterBase)


def adapter_for_async(
    transport: AsyncTransport, *, lock_pool: Any = None
) -> AsyncPartitionAdapterBase:
    """Return the asyncio *transport*'s partition adapter, as :func:`adapter_for`."""
    return _open(transport, lock_pool, AsyncPartitionAdapterBase)
