"""Find a transport's partition adapter through the entry-point group ``pgque.partition_adapters``.

Each entry is named after a transport class, by the module where that class is public
(``pgque.redis.RedisTransport``), and its value is the adapter class serving it. A transport is
served by the entry of the nearest class in its MRO; an entry whose module is not imported
cannot name the transport's class (importing a class's module imports its package first), so
it is never loaded: looking up a memory transport's adapter imports no database driver.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pgque.core.errors import ConfigurationError
from pgque.core.partition_base import ENTRY_POINT_GROUP

__all__ = ["adapter_factory"]


def _served_class(name: str) -> type | None:
    """Return the class an entry's *name* names, if its module is imported, else None."""
    module_name, _, attribute = name.rpartition(".")
    module = sys.modules.get(module_name)
    served = getattr(module, attribute, None) if module is not None else None
    return served if isinstance(served, type) else None


def adapter_factory(transport: object) -> Callable[..., Any] | None:
    """Return the adapter class registered for *transport*'s class (or a base), else None.

    Raises ConfigurationError when the adapter's entry point fails to import or is not
    callable.
    """
    candidates: dict[type, EntryPoint] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        served = _served_class(entry.name)
        if served is not None and isinstance(transport, served):
            candidates.setdefault(served, entry)
    for cls in type(transport).__mro__:
        ep = candidates.get(cls)
        if ep is None:
            continue
        try:
            factory: Any = ep.load()
        except ImportError as exc:
            raise ConfigurationError(
                f"the partition adapter of {ep.name} ({ep.value}) failed to import: {exc}"
            ) from exc
        if not callable(factory):
            raise ConfigurationError(
                f"entry point {ep.name} = {ep.value} is not a partition adapter class"
            )
        loaded: Callable[..., Any] = factory
        return loaded
    return None
